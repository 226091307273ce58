// Arrays sized for the whole trace.
//
// Stages that know an upper bound on what they will store (the reader from
// the file's size, identity from the number of observations) reserve it
// once: regrowing a large array copies it into fresh memory, and on the
// machines memtl runs on (virtual machines especially) the first touch of
// fresh memory costs more than the copy. Capacity that is never written is
// address space, not resident memory.
//
// (Until 2026-11-23 these arrays were also advised as transparent huge
// pages. Measured again at today's footprint, the advice made a 10^7-event
// export 10% slower on the development machine: the kernel zeroes each
// 2 MiB page when it is first touched, and that zeroing was 15% of the
// run's samples against 0.4% with 4 KiB pages. docs/performance.md.)
#pragma once

#include <cstddef>
#include <vector>

namespace memtl {

// v.reserve(n): room for an upper bound, so that v is never regrown.
template <typename T>
void ReserveLarge(std::vector<T>& v, size_t n) {
  v.reserve(n);
}

// v.assign(n, value), first dropping v's storage when it is too small (so
// that assign does not copy the old contents into a regrown array).
template <typename T>
void AssignLarge(std::vector<T>& v, size_t n, const T& value) {
  if (v.capacity() < n) {
    std::vector<T>().swap(v);
    ReserveLarge(v, n);
  }
  v.assign(n, value);
}

// Frees v's storage now. (`v = {}` would not: it assigns an empty
// initializer list, which keeps the capacity.)
template <typename T>
void FreeArray(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace memtl
