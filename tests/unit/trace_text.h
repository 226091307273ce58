// Builds small traces as JSON Lines text for tests, so each test states its
// events in a few readable lines.
#pragma once

#include <string>

#include "core/model/trace.h"

namespace memtl::test {

// A copy of a trace's tensor records and allocation addresses, for tests
// that call the first stages directly and still read the trace after.
inline TensorRecords RecordsOf(const Trace& t) {
  return {t.tensors, t.tensor_ids, t.tensor_shapes, t.alloc_ptrs};
}

inline std::string Header(bool ids = false) {
  return std::string(R"({"format":"memtl-trace","version":1,"producer":"test","ids":)") +
         (ids ? "true" : "false") + "}\n";
}

// A tensor argument. `id`/`aid` < 0 are written as null.
inline std::string T(unsigned long impl, unsigned long ptr, int sizes0 = 4, long id = -1,
                     long aid = -1, const char* dev = "cpu") {
  auto num = [](long v) { return v < 0 ? std::string("null") : std::to_string(v); };
  return R"({"impl":)" + std::to_string(impl) + R"(,"ptr":)" + std::to_string(ptr) + R"(,"id":)" +
         num(id) + R"(,"aid":)" + num(aid) + R"(,"dev":")" + dev +
         R"(","dtype":"float32","layout":"strided","sizes":[)" + std::to_string(sizes0) +
         R"(],"strides":[1]})";
}

inline std::string Op(int i, int p, const std::string& name, long t0, long t1,
                      const std::string& args, const char* scope = "function") {
  return R"({"k":"op","i":)" + std::to_string(i) + R"(,"p":)" + std::to_string(p) + R"(,"name":")" +
         name + R"(","t0":)" + std::to_string(t0) + R"(,"t1":)" + std::to_string(t1) +
         R"(,"tid":1,"scope":")" + scope + R"(","seq":-1,"args":[)" + args + "]}\n";
}

inline std::string Alloc(int i, int p, long t, unsigned long ptr, long bytes,
                         const char* dev = "cpu", long id = -1, long aid = -1) {
  auto num = [](long v) { return v < 0 ? std::string("null") : std::to_string(v); };
  return R"({"k":"alloc","i":)" + std::to_string(i) + R"(,"p":)" + std::to_string(p) + R"(,"t":)" +
         std::to_string(t) + R"(,"tid":1,"ptr":)" + std::to_string(ptr) + R"(,"bytes":)" +
         std::to_string(bytes) + R"(,"dev":")" + dev +
         R"(","total_allocated":0,"total_reserved":0,"id":)" + num(id) + R"(,"aid":)" + num(aid) +
         "}\n";
}

}  // namespace memtl::test
