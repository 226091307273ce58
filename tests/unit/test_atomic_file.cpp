// Atomic output (export/atomic_file.h): no partial file, whatever stops
// the run; links followed, streams written in place; outputs published
// together; gzip that an independent inflater reads back.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "export/atomic_file.h"

using namespace memtl;

TEST_CASE("export: atomic writes leave no partial file") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("memtl_atomic_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "out.json").string();
  {
    auto f = AtomicFile::Create(path, false);
    REQUIRE(f.ok());
    std::unique_ptr<AtomicFile> file(f.value());
    REQUIRE(file->Write("partial").ok());
    // Destroyed without Commit: as if the run failed.
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_empty(dir));
  REQUIRE(WriteFileAtomically(path, "[[], []]", false).ok());
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  CHECK(text == "[[], []]");
  CHECK_FALSE(WriteFileAtomically((dir / "missing" / "x.json").string(), "x", false).ok());
  fs::remove_all(dir);
}

namespace {
namespace fs = std::filesystem;
}  // namespace

TEST_CASE("atomic output: links are followed to their end, missing or not; others streamed") {
  const fs::path dir = fs::temp_directory_path() / ("memtl_links_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // A link to nothing yet: its end is created, the link stays.
  fs::create_symlink(dir / "end.json", dir / "link.json");
  REQUIRE(WriteFileAtomically((dir / "link.json").string(), "[1]", false).ok());
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(read(dir / "end.json") == "[1]");
  // A relative link to a relative link to nothing.
  fs::create_symlink("end2.json", dir / "mid.json");
  fs::create_symlink("mid.json", dir / "rel.json");
  auto t = ResolveOutput((dir / "rel.json").string());
  REQUIRE(t.ok());
  CHECK(t.value().target == (dir / "end2.json").string());
  CHECK_FALSE(t.value().stream);
  // A loop of links, and a directory, are refused.
  fs::create_symlink("loop_b", dir / "loop_a");
  fs::create_symlink("loop_a", dir / "loop_b");
  CHECK_FALSE(ResolveOutput((dir / "loop_a").string()).ok());
  CHECK_FALSE(ResolveOutput(dir.string()).ok());
  // A named pipe is a stream, written in place.
  REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
  auto f = ResolveOutput((dir / "fifo").string());
  REQUIRE(f.ok());
  CHECK(f.value().stream);
  CHECK(ResolveOutput("/dev/null").value().stream);
  fs::remove_all(dir);
}

TEST_CASE("atomic output: finished files replace nothing until published") {
  const fs::path dir = fs::temp_directory_path() / ("memtl_publish_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  {
    std::unique_ptr<AtomicFile> fa(AtomicFile::Create(a, false).value());
    std::unique_ptr<AtomicFile> fb(AtomicFile::Create(b, true).value());
    REQUIRE(fa->Write("[]").ok());
    REQUIRE(fa->Finish().ok());
    REQUIRE(fb->Write("[]").ok());
    REQUIRE(fb->Finish().ok());
    CHECK(fs::is_empty(dir));  // both written in full, neither in place
    REQUIRE(fa->Publish().ok());
    // b is dropped unpublished, as when a later output fails.
  }
  CHECK(fs::exists(a));
  CHECK_FALSE(fs::exists(b));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}

// Runs `body` in a child process and returns how it ended (waitpid status).
template <typename Body>
int InChild(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_CASE("export: nothing is left behind when the run is killed or interrupted, named or not") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("memtl_kill_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string big(1 << 20, 'x');
  for (const bool named : {false, true}) {
    CAPTURE(named);
    // SIGKILL: no handler runs; only an unnamed file leaves nothing.
    if (!named) {
      const int status = InChild([&] {
        auto f = AtomicFile::Create((dir / "k.json").string(), false);
        if (!f.ok() || !f.value()->Write(big).ok()) _exit(3);
        raise(SIGKILL);
      });
      CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
      CHECK(fs::is_empty(dir));
    }
    // SIGINT and SIGTERM: the handler removes a named temporary file.
    for (const int sig : {SIGINT, SIGTERM}) {
      const int status = InChild([&] {
        ForceNamedTemporaryFilesForTests(named);
        InstallCleanupOnSignals();
        auto f = AtomicFile::Create((dir / "i.json").string(), true);
        if (!f.ok() || !f.value()->Write(big).ok()) _exit(3);
        if (named && fs::is_empty(dir)) _exit(4);  // the named file must exist to be removed
        raise(sig);
      });
      CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig));
      CHECK(fs::is_empty(dir));
    }
    // A name at the limit: the temporary name is shortened to fit.
    ForceNamedTemporaryFilesForTests(named);
    const std::string longest = (dir / (std::string(250, 'a') + ".json")).string();
    REQUIRE(WriteFileAtomically(longest, "[]", false).ok());
    // An existing destination is replaced.
    REQUIRE(WriteFileAtomically(longest, "[[]]", false).ok());
    std::ifstream in(longest);
    std::string text;
    std::getline(in, text);
    CHECK(text == "[[]]");
    fs::remove(longest);
    CHECK(fs::is_empty(dir));
    ForceNamedTemporaryFilesForTests(false);
  }
  fs::remove_all(dir);
}

TEST_CASE("atomic file: gzip output inflates with zlib to the bytes written") {
  // AtomicFile compresses with ISA-L; zlib, an independent decoder, must
  // read it back whole, checking the trailer's CRC-32 and length.
  std::string text;
  std::mt19937 rng(7);
  while (text.size() < 300000) text += "[" + std::to_string(rng()) + ", 1],\n";
  const std::string path = std::filesystem::temp_directory_path() /
                           ("memtl_gz_test_" + std::to_string(getpid()) + ".gz");
  {
    auto f = AtomicFile::Create(path, true);
    REQUIRE(f.ok());
    std::unique_ptr<AtomicFile> file(f.value());
    // Several writes, empty, tiny and of sizes on both sides of 64 KiB.
    size_t at = 0;
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{70000}, size_t{5}}) {
      REQUIRE(file->Write(std::string_view(text).substr(at, n)).ok());
      at += n;
    }
    REQUIRE(file->Write(std::string_view(text).substr(at)).ok());
    REQUIRE(file->Commit().ok());
  }
  std::ifstream in(path, std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  REQUIRE(written.size() > 18);
  CHECK(written.size() < text.size() / 2);

  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
  std::string inflated(text.size() + 1, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(written.data());
  zs.avail_in = static_cast<uInt>(written.size());
  zs.next_out = reinterpret_cast<Bytef*>(inflated.data());
  zs.avail_out = static_cast<uInt>(inflated.size());
  CHECK(inflate(&zs, Z_FINISH) == Z_STREAM_END);
  CHECK(zs.avail_in == 0);  // one member, nothing after it
  inflated.resize(zs.total_out);
  inflateEnd(&zs);
  CHECK(inflated == text);
}
