// CRC-32 of gzip (and PNG): the same value as zlib's crc32_z, computed with
// carry-less multiplication where the CPU has it.
//
// zlib computes the check of every byte it inflates or deflates in gzip
// mode with a table method, which cost a quarter of the inflating thread's
// time (perf, 10^5-event trace). The reader and the gzip writer switch
// zlib's own check off and use this instead (docs/performance.md, tenth
// round).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memtl {

// The CRC-32 of `len` bytes at `data` continued from `crc` (0 to start), as
// zlib's crc32_z(crc, data, len) returns it.
uint32_t Crc32(uint32_t crc, const void* data, size_t len);

// Whether Crc32 uses the carry-less multiply path on this machine (for
// tests, which check both paths against zlib).
bool Crc32HasClmul();

// Crc32 by zlib's table method only (for tests and for short inputs).
uint32_t Crc32Portable(uint32_t crc, const void* data, size_t len);

}  // namespace memtl
