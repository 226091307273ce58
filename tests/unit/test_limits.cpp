// Limits on what input can drive: memory that stays bounded whatever the
// input holds (docs/reliability.md, "Bounded memory"), and numbers that are
// exact or refused, never silently wrong ("No silent wrong number").
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/identity/identity.h"
#include "core/pipeline/analysis.h"
#include "core/read/memtl/trace_reader.h"
#include "core/schema/schema.h"
#include "core/timeline/timeline.h"
#include "trace_text.h"

using namespace memtl;
using namespace memtl::test;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // shadow memory: no RSS bound, no address-space limit
#else
constexpr bool kSanitized = false;
#endif

// A gzip file: `head`, then `count` bytes `fill`, then `tail`, deflated as
// it is generated so that a gigabyte line never exists in this process.
std::string GzipFile(const std::string& head, char fill, size_t count, const std::string& tail) {
  char path[] = "/tmp/memtl_limits_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  gzFile gz = gzopen(path, "wb1");
  REQUIRE(gz != nullptr);
  gzwrite(gz, head.data(), static_cast<unsigned>(head.size()));
  const std::string chunk(size_t{1} << 20, fill);
  for (size_t done = 0; done < count; done += chunk.size()) {
    gzwrite(gz, chunk.data(), static_cast<unsigned>(std::min(chunk.size(), count - done)));
  }
  gzwrite(gz, tail.data(), static_cast<unsigned>(tail.size()));
  gzclose(gz);
  return path;
}

// Kernel counters of this process, in KiB ("VmHWM", "VmRSS").
long StatusKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(line.find(':') + 1));
  }
  return -1;
}

// Peak resident memory, in MiB above what was resident before, of `fn`;
// -1 where the peak cannot be reset.
template <typename Fn>
long PeakGrowthMiB(Fn&& fn) {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets VmHWM to the current RSS
  clear.close();
  if (!clear) return -1;
  const long before = StatusKiB("VmRSS:");
  fn();
  return (StatusKiB("VmHWM:") - before) >> 10;
}

const char kLongLineHead[] = R"({"format":"memtl-trace","version":1,"profile_memory":true})"
                             "\n"
                             R"({"k":"other","i":0,"p":-1,"t0":0,"name":")";

}  // namespace

TEST_CASE("limits: a line past 64 MiB is refused when the limit is reached, not after") {
  // A 1 GiB line in about a megabyte of gzip. Read whole, it took 2 GiB.
  const std::string path = GzipFile(kLongLineHead, 'a', size_t{1} << 30, "\"}\n");
  for (const bool threaded : {true, false}) {
    CAPTURE(threaded);
    ReadOptions options;
    options.threaded = threaded;
    std::string error;
    const long growth = PeakGrowthMiB([&] {
      auto r = ReadTraceFile(path, options);
      error = r.ok() ? "<ok>" : r.status().message();
    });
    CHECK(error == path + ": line 2: line longer than 64 MiB");
    // The line up to the limit and one decode step, in a block reserved once.
    if (growth >= 0 && !kSanitized) CHECK(growth < 100);
  }
  std::remove(path.c_str());
}

TEST_CASE("limits: binary input is refused at the limit at the latest, as not JSON") {
  // 1 GiB of zero bytes, no newline (a disk image, /dev/zero).
  const std::string path = GzipFile("", '\0', size_t{1} << 30, "");
  std::string error;
  const long growth = PeakGrowthMiB([&] {
    auto r = ReadTraceFile(path);
    error = r.ok() ? "<ok>" : r.status().message();
  });
  CHECK(error == path + ": line 1: not valid JSON (column 1: invalid value)");
  if (growth >= 0 && !kSanitized) CHECK(growth < 100);
  std::remove(path.c_str());
  // Binary bytes after a good header: the line's own error, at its column.
  const std::string text = Header() + "{\"k\":" + std::string((size_t{65} << 20), '\x01');
  CHECK(ReadTraceString(text, "t.trace").status().message() ==
        "t.trace: line 2: not valid JSON (column 6: invalid value)");
  // A JSON text cut by the limit anywhere, even inside a token, is too long.
  for (const char* cut : {"\"abc", "tru", "12", "\"\\u00"}) {
    CAPTURE(cut);
    std::string line = R"({"k":"op","args":[)";
    while (line.size() < (size_t{64} << 20) - 8) line += "null,";
    line += cut;
    line += std::string((size_t{64} << 20) + 1 - line.size(), ' ');  // cut at the limit
    line += "]}\n";
    CHECK(ReadTraceString(Header() + line, "t.trace").status().message() ==
          "t.trace: line 2: line longer than 64 MiB");
  }
}

TEST_CASE("limits: memory that runs out on either thread is an error, never an abort") {
  if (kSanitized) return;
  const std::string path = GzipFile(kLongLineHead, 'a', size_t{256} << 20, "\"}\n");
  for (const bool threaded : {true, false}) {
    CAPTURE(threaded);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Address space for what is mapped now and a little more: the block
      // that the long line needs cannot be had.
      const long vm = StatusKiB("VmSize:");
      const rlimit limit{static_cast<rlim_t>(vm + (24 << 10)) << 10,
                         static_cast<rlim_t>(vm + (24 << 10)) << 10};
      setrlimit(RLIMIT_AS, &limit);
      try {  // what escapes is a failure too; it must not reach doctest here
        ReadOptions options;
        options.threaded = threaded;
        auto r = ReadTraceFile(path, options);
        const std::string message = r.ok() ? "<ok>" : r.status().message();
        (void)!write(fds[1], message.data(), message.size());
      } catch (...) {
        _exit(3);
      }
      _exit(0);
    }
    close(fds[1]);
    std::string message;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, n);
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    // The line where reading stopped: the block of lines 1 and 2 was being
    // decoded when the reader thread's allocation failed.
    CHECK(message == path + ": line 1: out of memory");
  }
  std::remove(path.c_str());
}

TEST_CASE("limits: times convert exactly at both ends of the 64-bit range") {
  // Python's int(t / 1000), computed by Python.
  CHECK(PyTrueDivTrunc1000(INT64_MIN) == -9223372036854776);
  CHECK(PyTrueDivTrunc1000(INT64_MIN + 1) == -9223372036854776);
  CHECK(PyTrueDivTrunc1000(INT64_MAX) == 9223372036854776);
  CHECK(PyTrueDivTrunc1000(-(int64_t{1} << 53) - 1) == -9007199254740);
  CHECK(PyTrueDivTrunc1000(-(int64_t{1} << 53) - 1001) == -9007199254741);
  CHECK(PyTrueDivTrunc1000(4611686018427388403) == 4611686018427388);
  CHECK(PyTrueDivTrunc1000(-1001) == -1);

  // End to end: PyTorch's times for the trace (the first time seen stands
  // in for the negative ones, in order).
  char path[] = "/tmp/memtl_times_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string text = Header() + Alloc(0, -1, INT64_MIN, 100, 16) +
                           Alloc(1, -1, 1000000000000000000, 200, 16) +
                           Alloc(2, -1, INT64_MAX, 100, -16);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  auto c = RunPipeline(path);
  std::remove(path);
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.status().message()));
  const CoalescedTimeline ct = Coalesce(c.value()->timeline, c.value()->categories, 0);
  CHECK(ct.times == std::vector<int64_t>{-9223372036854776, 1000000000000000, 9223372036854776});
}

TEST_CASE("limits: the nearest op input is found across the whole 64-bit time range") {
  // A python call at 0 between op inputs at -2^63 (2^63 ns before) and at
  // 2^63-1 (one ns nearer): the later one is nearer.
  const std::string py =
      R"({"k":"py","i":2,"p":-1,"name":"nn.Module: Linear_0","t0":0,"t1":1,"tid":1,"module":{"self":null,"cls":"Linear","params":[{"name":"weight","t":{"ptr":100},"grad":null}]}})"
      "\n";
  auto r = ReadTraceString(Header() + Op(0, -1, "aten::relu", INT64_MIN, 0, T(1, 100)) +
                               Op(1, -1, "aten::relu", INT64_MAX, INT64_MAX, T(7, 100)) + py,
                           "t.trace");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  Trace t = std::move(r.value());
  Diagnostics diag;
  (void)AssignIdentity(t, test::RecordsOf(t), t.tensor_ptrs, SchemaRegistry::Builtin(), diag);
  CHECK(t.tensors[t.params[0].tensor].impl == t.tensors[1].impl);
}

TEST_CASE("limits: a tensor larger than the size map holds is an error, not a clamp") {
  auto tensor = [](const std::string& sizes) {
    return R"({"impl":1,"ptr":100,"dev":"cpu","dtype":"float32","sizes":[)" + sizes +
           R"(],"strides":[1]})";
  };
  // 4 * (2^44 - 1) bytes fit in 2^46 - 1; 4 * 2^44 do not.
  CHECK(
      ReadTraceString(Header() + Op(0, -1, "aten::relu", 1, 2, tensor("17592186044415")), "t.trace")
          .ok());
  CHECK(
      ReadTraceString(Header() + Op(0, -1, "aten::relu", 1, 2, tensor("17592186044416")), "t.trace")
          .status()
          .message() ==
      "t.trace: line 2: tensor of more than 2^46-1 bytes (its \"sizes\", \"strides\" and "
      "dtype; the size map's limit)");
}

TEST_CASE("limits: live bytes past 2^63-1 on a device are refused, up to it they are exact") {
  // 2^16 allocations of 2^47-1 bytes and one of 2^16-1: 2^63-1 live bytes.
  auto trace = [](int64_t last) {
    std::string text = Header();
    text.reserve(200 << 16);
    const int n = 1 << 16;
    for (int i = 0; i < n; ++i)
      text += Alloc(i, -1, 1000 * (i + 1), 16 * (i + 1), (int64_t{1} << 47) - 1);
    text += Alloc(n, -1, 1000 * (n + 1), 16 * (n + 1), last);
    return text;
  };
  // Categorize runs the check: the error, or an exact total at 2^63-1.
  auto check = [](const std::string& text) {
    auto r = ReadTraceString(text, "t.trace");
    REQUIRE(r.ok());
    auto a = Analyze(std::move(r.value()), "t.trace");
    REQUIRE(a.ok());
    auto c = Categorize(std::move(a.value()));
    if (!c.ok()) return c.status().message();
    const Categorized& cz = *c.value();
    const CoalescedTimeline ct = Coalesce(cz.timeline, cz.categories, 0);
    CHECK(ct.sizes.back()[8] == INT64_MAX);
    return std::string("<ok>");
  };
  CHECK(check(trace((int64_t{1} << 16) - 1)) == "<ok>");
  CHECK(
      check(trace(int64_t{1} << 16)) ==
      "t.trace: the live bytes on cpu pass 2^63-1 at \"[memory]\" (event 65536, t=65537000) (65536 "
      "bytes); no 64-bit total can hold them");
}
