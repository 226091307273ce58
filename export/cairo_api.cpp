// Loads cairo at run time (see cairo_api.h).
#include "export/cairo_api.h"

#include <dlfcn.h>

namespace memtl {

namespace {

struct Loaded {
  CairoApi api;
  std::string error;  // empty: every function was found
};

Loaded Load() {
  Loaded out;
  // The soname of cairo's stable ABI (1.x), which every distribution ships.
  void* lib = dlopen("libcairo.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    out.error = std::string("cannot load cairo for the plot (") +
                (why != nullptr ? why : "libcairo.so.2 not found") + ")";
    return out;
  }
  // The library stays loaded for the life of the process.
#define MEMTL_CAIRO_LOAD(name)                                           \
  out.api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  if (out.api.name == nullptr && out.error.empty())                      \
    out.error = "cannot load cairo for the plot (libcairo.so.2 lacks " #name ")";
  MEMTL_CAIRO_FUNCTIONS(MEMTL_CAIRO_LOAD)
#undef MEMTL_CAIRO_LOAD
  return out;
}

}  // namespace

const CairoApi* LoadCairo(std::string* error) {
  static const Loaded loaded = Load();
  if (!loaded.error.empty()) {
    if (error != nullptr) *error = loaded.error;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace memtl
