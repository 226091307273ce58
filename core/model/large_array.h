// Arrays sized for the whole trace.
//
// Stages that know an upper bound on what they will store (the reader from
// the file's size, identity from the number of observations) reserve it
// once with `reserve`: regrowing a large array copies it into fresh memory,
// and on the machines memtl runs on (virtual machines especially) the first
// touch of fresh memory costs more than the copy. Capacity that is never
// written is address space, not resident memory. A stage frees an array
// with FreeArray as soon as no later reader needs it.
//
// (Such arrays were once also advised as transparent huge pages. Measured
// again, the advice made the largest exports slower: the kernel zeroes each
// 2 MiB page when it is first touched, and that zeroing dominated the run;
// docs/performance.md.)
#pragma once

#include <vector>

namespace memtl {

// Frees v's storage now. (`v = {}` would not: it assigns an empty
// initializer list, which keeps the capacity.)
template <typename T>
void FreeArray(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace memtl
