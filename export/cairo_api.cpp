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

// The library MEMTL_CAIRO names, else the soname of cairo's stable ABI
// (1.x), which every distribution ships.
std::string CairoFile() {
  const char* env = std::getenv("MEMTL_CAIRO");
  return env != nullptr && *env != '\0' ? env : "libcairo.so.2";
}

// Opens cairo and resolves its functions into `api`; returns the handle, or
// nullptr with `error` set.
void* Open(CairoApi* api, std::string* error) {
  const std::string file = CairoFile();
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    *error = "cannot load cairo for the plot (" + (why != nullptr ? std::string(why) : file) +
             "; the other output formats do not need it)";
    return nullptr;
  }
#define MEMTL_CAIRO_LOAD(fn)                                    \
  api->fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn)); \
  if (api->fn == nullptr && error->empty())                     \
    *error = "cannot load cairo for the plot (" + file + " lacks " #fn ")";
  MEMTL_CAIRO_FUNCTIONS(MEMTL_CAIRO_LOAD)
#undef MEMTL_CAIRO_LOAD
#define MEMTL_CAIRO_LOAD_OPTIONAL(fn) api->fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn));
  MEMTL_CAIRO_OPTIONAL_FUNCTIONS(MEMTL_CAIRO_LOAD_OPTIONAL)
#undef MEMTL_CAIRO_LOAD_OPTIONAL
  return lib;
}

Loaded Load() {
  Loaded out;
  // Loaded for good: the library stays for the life of the process.
  Open(&out.api, &out.error);
  return out;
}

}  // namespace

bool CairoLoadable(std::string* error) {
  CairoApi api;
  std::string why;
  void* lib = Open(&api, &why);
  if (lib != nullptr) dlclose(lib);  // its memory goes with it until the plot
  if (why.empty()) return true;
  if (error != nullptr) *error = why;
  return false;
}

const CairoApi* LoadCairo(std::string* error) {
  static const Loaded loaded = Load();
  if (!loaded.error.empty()) {
    if (error != nullptr) *error = loaded.error;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace memtl
