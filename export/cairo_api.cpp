// Loads cairo at run time (see cairo_api.h).
#include "export/cairo_api.h"

#include <cairo/cairo-ft.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace memtl {

namespace {

struct Loaded {
  CairoApi api;
  std::string error;  // empty: every function was found
};

// The plot's font from its file (cairo_api.h), or null. FreeType is
// cairo's dependency, so it is loaded already; its functions are looked up
// by name like cairo's, and nothing opened here is ever freed: cairo keeps
// the font face, and the face the FreeType face, for the process's life.
cairo_font_face_t* OpenPlotFont(void* cairo_lib, decltype(&::cairo_set_font_face)* set_font_face) {
  if (access(kPlotFontFile, R_OK) != 0) return nullptr;
  auto create = reinterpret_cast<decltype(&::cairo_ft_font_face_create_for_ft_face)>(
      dlsym(cairo_lib, "cairo_ft_font_face_create_for_ft_face"));
  auto status = reinterpret_cast<decltype(&::cairo_font_face_status)>(
      dlsym(cairo_lib, "cairo_font_face_status"));
  auto set =
      reinterpret_cast<decltype(&::cairo_set_font_face)>(dlsym(cairo_lib, "cairo_set_font_face"));
  if (create == nullptr || status == nullptr || set == nullptr) return nullptr;
  // Looked up through cairo's handle, which searches its dependencies: the
  // FreeType that cairo itself uses.
  auto init = reinterpret_cast<decltype(&::FT_Init_FreeType)>(dlsym(cairo_lib, "FT_Init_FreeType"));
  auto open = reinterpret_cast<decltype(&::FT_New_Face)>(dlsym(cairo_lib, "FT_New_Face"));
  if (init == nullptr || open == nullptr) return nullptr;
  FT_Library library = nullptr;
  FT_Face face = nullptr;
  if (init(&library) != 0 || open(library, kPlotFontFile, 0, &face) != 0) return nullptr;
  cairo_font_face_t* font = create(face, 0);
  if (status(font) != CAIRO_STATUS_SUCCESS) return nullptr;
  *set_font_face = set;
  return font;
}

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
  if (out.error.empty()) out.api.plot_font = OpenPlotFont(lib, &out.api.cairo_set_font_face);
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

bool CairoLoadable(std::string* error) {
  // In a child process: the parent stays without cairo until it draws.
  int fds[2];
  if (pipe(fds) != 0) return LoadCairo(error) != nullptr;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return LoadCairo(error) != nullptr;  // no child to be had: load it here
  }
  if (pid == 0) {
    close(fds[0]);
    std::string why;
    const bool ok = LoadCairo(&why) != nullptr;
    for (size_t done = 0; done < why.size();) {
      const ssize_t n = write(fds[1], why.data() + done, why.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(ok ? 0 : 1);  // no exit handlers: nothing of the parent's runs twice
  }
  close(fds[1]);
  std::string why;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      why.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited != pid) {
    // No status to be had (SIGCHLD ignored, say): load it here instead.
    return LoadCairo(error) != nullptr;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && why.empty()) return true;
  if (error != nullptr) {
    *error = !why.empty() ? why : "cannot load cairo for the plot (the check exited abnormally)";
  }
  return false;
}

}  // namespace memtl
