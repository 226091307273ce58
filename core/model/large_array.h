// Large arrays and the cost of touching memory for the first time.
//
// On the machines memtl runs on (virtual machines especially) the first
// write to a fresh 4 KiB page costs a fault that is far dearer than the
// write; at 10^7 events the analysis touches about 2 GiB and those faults
// were a third of its time. Arrays sized for the whole trace are therefore
// reserved once and advised as transparent-huge-page candidates, so that the
// kernel maps them 2 MiB at a time where it can. The advice changes neither
// the contents nor the output, only how the pages are mapped.
#pragma once

#include <cstddef>
#include <vector>

namespace memtl {

// Advises the kernel to back the whole 2 MiB-aligned pages inside
// [data, data + bytes) with huge pages. Does nothing for ranges under
// 32 MiB (there the partly used last huge page of an array reserved for an
// upper bound costs more memory than the faults save), on systems without
// the advice, or when the advice is refused.
void AdviseHugePages(const void* data, size_t bytes);

// v.reserve(n), then advice for the reserved storage.
template <typename T>
void ReserveLarge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  AdviseHugePages(v.data(), v.capacity() * sizeof(T));
}

// v.assign(n, value) into storage reserved with ReserveLarge.
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
