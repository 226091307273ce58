// Loads cairo at run time (see cairo_api.h).
#include "export/cairo_api.h"

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
