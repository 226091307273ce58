// memtl whatif's changes from the command line (whatif_args.h).
#include "cli/whatif_args.h"

#include <cctype>
#include <charconv>

#include "core/model/quote.h"

namespace memtl::cli {

namespace {

// "KIND=VALUE" split at its first '='; false when there is none.
bool Split(const std::string& s, std::string& kind, std::string& value) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) return false;
  kind = s.substr(0, eq);
  value = s.substr(eq + 1);
  return true;
}

}  // namespace

Expected<WhatIfChanges> WhatIfChangesOf(const Args& args) {
  WhatIfChanges ch;
  for (const std::string& s : args.shards) {
    std::string kind, value;
    int n = 0;
    const bool parsed = Split(s, kind, value);
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (!parsed || ec != std::errc() || end != value.data() + value.size() || n < 2 || n > 65536) {
      return Status::Error("--shard " + Quote(s) +
                           ": write KIND=N, KIND optimizer, grads or params and N the ranks "
                           "(2 to 65536)");
    }
    int* slot = kind == "optimizer" ? &ch.shard_optimizer
                : kind == "grads"   ? &ch.shard_grads
                : kind == "params"  ? &ch.shard_params
                                    : nullptr;
    if (slot == nullptr)
      return Status::Error("--shard " + Quote(s) + ": KIND is optimizer, grads or params");
    *slot = n;
  }
  for (const std::string& s : args.dtypes) {
    std::string kind, value;
    if (!Split(s, kind, value))
      return Status::Error("--dtype " + Quote(s) + ": write KIND=DTYPE, e.g. params=bf16");
    const int bytes = DtypeBytes(value);
    if (bytes == 0) {
      return Status::Error("--dtype " + Quote(s) +
                           ": DTYPE is bf16, fp16, fp32, fp64 or fp8 (or their torch names)");
    }
    const int index = kind == "params" ? 0 : kind == "grads" ? 1 : kind == "optimizer" ? 2 : -1;
    if (index < 0)
      return Status::Error("--dtype " + Quote(s) + ": KIND is params, grads or optimizer");
    ch.dtype_bytes[static_cast<size_t>(index)] = bytes;
  }
  if (args.set_to_none && args.no_set_to_none)
    return Status::Error("--set-to-none and --no-set-to-none: give one");
  if (args.set_to_none || args.no_set_to_none) ch.set_to_none = args.set_to_none;
  for (const char c : args.optimizer)
    ch.optimizer += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  ch.checkpoint = args.checkpoints;
  ch.wrap = args.wrap;
  if (!ch.wrap.empty() && ch.shard_params <= 1 && ch.shard_grads <= 1)
    return Status::Error("--wrap names the units of --shard params or grads: give one of them");
  if (!ch.Any()) {
    return Status::Error(
        "no change to replay: give --shard, --checkpoint, --set-to-none, --no-set-to-none, "
        "--optimizer or --dtype (see memtl whatif --help)");
  }
  return ch;
}

}  // namespace memtl::cli
