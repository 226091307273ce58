// The wheel's command (MEMTL_STATIC_ARCHIVES) links libstdc++ statically,
// and its std::random_device, which iostreams' string instantiations pull
// in and memtl never calls, refers to arc4random, new in glibc 2.36. Defined
// here, the command needs glibc 2.35 (Ubuntu 22.04), not 2.36: the wheel's
// manylinux tag is that of its newest glibc symbol.
#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

extern "C" uint32_t arc4random() {
  uint32_t value = 0;
  size_t got = 0;
  while (got < sizeof value) {
    const ssize_t n = getrandom(reinterpret_cast<char*>(&value) + got, sizeof value - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    if (n < 0 && errno != EINTR) break;  // no getrandom (a kernel before 3.17)
  }
  return value;
}
