// Loads cairo at run time (see cairo_api.h).
#include "export/cairo_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace memtl {

namespace {

struct Loaded {
  CairoApi api;
  std::string error;  // empty: every function was found
};

Loaded Load() {
  Loaded out;
  // The soname of cairo's stable ABI (1.x), which every distribution ships;
  // MEMTL_CAIRO names another file (a cairo built elsewhere).
  const char* env = std::getenv("MEMTL_CAIRO");
  const std::string file = env != nullptr && *env != '\0' ? env : "libcairo.so.2";
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    out.error = "cannot load cairo for the plot (" + (why != nullptr ? std::string(why) : file) +
                "; the other output formats do not need it)";
    return out;
  }
  // The library stays loaded for the life of the process.
#define MEMTL_CAIRO_LOAD(fn)                                       \
  out.api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn)); \
  if (out.api.fn == nullptr && out.error.empty())                  \
    out.error = "cannot load cairo for the plot (" + file + " lacks " #fn ")";
  MEMTL_CAIRO_FUNCTIONS(MEMTL_CAIRO_LOAD)
#undef MEMTL_CAIRO_LOAD
#define MEMTL_CAIRO_LOAD_OPTIONAL(fn) \
  out.api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn));
  MEMTL_CAIRO_OPTIONAL_FUNCTIONS(MEMTL_CAIRO_LOAD_OPTIONAL)
#undef MEMTL_CAIRO_LOAD_OPTIONAL
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
