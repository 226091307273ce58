// Reads a memtl trace (docs/trace-format.md) into the Trace model.
//
// Errors name the file, the line and what was expected; reading stops at the
// first one. With `partial`, a trace whose last line was cut mid-record (the
// recorder was killed) is read up to the last complete record.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/model/status.h"
#include "core/model/trace.h"
#include "core/read/common/format.h"
#include "core/read/common/read_options.h"

namespace memtl {

Expected<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options = {},
                              ReadInfo* info = nullptr);
// Whether `name` is a device as PyTorch parses one (c10::Device): "type"
// or "type:index" with a type PyTorch knows and an index of up to three
// digits. The rule for every device a trace names (the memtl trace reader
// refuses any other) and for a --device given with any input.
bool IsDeviceName(std::string_view name);
// `--device` checked by that rule: ok when empty or valid, else the
// one-line refusal (for a raw timeline, which names no device, the value
// was taken as it came).
Status CheckDeviceOption(std::string_view device);

Expected<Trace> ReadTraceString(std::string data, const std::string& name,
                                const ReadOptions& options = {}, ReadInfo* info = nullptr);

// The memtl trace reader on an input opened and sniffed (common/format.h),
// its first bytes read once.
Expected<Trace> ReadTraceInput(OpenedInput input, const ReadOptions& options,
                               ReadInfo* info = nullptr);

}  // namespace memtl
