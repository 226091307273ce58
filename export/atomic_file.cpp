// Atomic output with optional streaming gzip compression.
#include "export/atomic_file.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace memtl {

namespace {
// Compressed outputs (.raw.json.gz, .json.gz) are written by ISA-L's gzip
// mode at level 1: several times faster than zlib at level 2, which memtl
// used before, and smaller files; ISA-L's levels 2 and 3 compress hardly
// more for as long or longer (docs/performance.md, "Libraries measured").
// The JSON inside is the same.
constexpr uint32_t kGzipLevel = 1;
// Level 1's working buffer at ISA-L's "small" size: the larger ones were
// no faster and compressed no better to speak of.
constexpr size_t kLevelBufBytes = ISAL_DEF_LVL1_SMALL;
// Compressed bytes written to the file at a time.
constexpr size_t kOutBytes = 64 << 10;
// The most input handed to isal_deflate at once (its counts are 32-bit).
constexpr size_t kMaxIn = size_t{1} << 30;
}  // namespace

// On the heap with its AtomicFile: ISA-L's stream is about 80 KiB, and no
// buffer of this size may live on a stack (docs/reliability.md, "Small
// stacks").
struct AtomicFile::Deflater {
  isal_zstream zs{};
  std::vector<uint8_t> level_buf = std::vector<uint8_t>(kLevelBufBytes);
  std::vector<uint8_t> out = std::vector<uint8_t>(kOutBytes);
  Deflater() {
    isal_deflate_init(&zs);
    zs.gzip_flag = IGZIP_GZIP;  // ISA-L writes the gzip header and trailer (CRC-32, length)
    zs.level = kGzipLevel;
    zs.level_buf = level_buf.data();
    zs.level_buf_size = static_cast<uint32_t>(level_buf.size());
  }
};

namespace {

// The named temporary files of live AtomicFiles, for the signal handler:
// fixed slots of fixed size, claimed and released with atomics, so the
// handler reads them without locks or allocation.
constexpr int kSlots = 16;
constexpr size_t kSlotBytes = 4096;
std::atomic<bool> slot_used[kSlots];
char slot_path[kSlots][kSlotBytes];

int ClaimSlot(const std::string& path) {
  if (path.size() >= kSlotBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (slot_used[i].load() || !slot_used[i].compare_exchange_strong(expected, true)) continue;
    std::memcpy(slot_path[i], path.c_str(), path.size() + 1);
    return i;
  }
  return -1;  // more live outputs than slots: only the destructor removes it
}

void ReleaseSlot(int slot) {
  if (slot >= 0) slot_used[slot].store(false);
}

extern "C" void RemoveTempsAndReraise(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (slot_used[i].load()) unlink(slot_path[i]);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

std::atomic<bool> force_named{false};

// The links followed to an output's end, as the kernel's own limit.
constexpr int kMaxLinkHops = 40;

// NAME_MAX of the file systems memtl meets; a temporary name stays within it.
constexpr size_t kNameMax = 255;

// ".BASE.tmp.XXXXXX", with BASE cut so that the name fits in kNameMax.
std::string TempName(const std::string& dir, const std::string& base) {
  const size_t room =
      kNameMax - std::string_view(".").size() - std::string_view(".tmp.XXXXXX").size();
  return dir + "/." + base.substr(0, std::min(base.size(), room)) + ".tmp.XXXXXX";
}

std::string Errno(const std::string& path) {
  return path + ": cannot write: " + std::strerror(errno);
}

// fsync of a directory, so that a link or rename in it survives power loss.
void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  ::close(fd);
}

}  // namespace

void ForceNamedTemporaryFilesForTests(bool named) { force_named.store(named); }

void InstallCleanupOnSignals() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    // A signal the parent ignored stays ignored (as nohup and `trap '' PIPE`
    // ask): with SIGPIPE ignored, a write to a gone reader fails with EPIPE
    // and the command ends with its own quiet status instead.
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = RemoveTempsAndReraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

Expected<OutputTarget> ResolveOutput(const std::string& path) {
  OutputTarget t{path, false};
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Error(path + ": cannot write: is a directory");
    if (!S_ISREG(st.st_mode)) {
      t.stream = true;
      return t;
    }
    struct stat lst {};
    if (lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      char* real = realpath(path.c_str(), nullptr);
      if (real != nullptr) {
        t.target = real;
        std::free(real);
      }
    }
    return t;
  }
  if (errno != ENOENT) return Status::Error(Errno(path));
  // Nothing there, or a link to nothing yet: its end is what gets created.
  // /dev/stdout with standard output closed ends in /proc/self/fd, where
  // nothing can be, and so fails when opened, before any analysis.
  for (int hops = 0; hops < kMaxLinkHops; ++hops) {
    struct stat lst {};
    if (lstat(t.target.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return t;
    std::vector<char> buf(static_cast<size_t>(std::max<off_t>(lst.st_size, 255)) + 1);
    const ssize_t n = readlink(t.target.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) return Status::Error(Errno(path));
    std::string next(buf.data(), static_cast<size_t>(n));
    const size_t slash = t.target.rfind('/');
    if (!next.starts_with('/') && slash != std::string::npos)
      next.insert(0, t.target, 0, slash + 1);
    t.target = std::move(next);
  }
  errno = ELOOP;
  return Status::Error(Errno(path));
}

Expected<AtomicFile*> AtomicFile::Create(const std::string& path, bool gzip) {
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->path_ = path;
  if (Status s = f->Open(); !s.ok()) return s;
  f->gzip_ = gzip;
  if (gzip) f->deflater_ = new Deflater();
  return f.release();
}

Status AtomicFile::Open() {
  if (path_ == "-") {
    fd_ = dup(STDOUT_FILENO);
    if (fd_ < 0)
      return Status::Error("standard output: cannot write: " + std::string(std::strerror(errno)));
    stream_ = true;
    return Status();
  }
  auto where = ResolveOutput(path_);
  if (!where.ok()) return where.status();
  target_ = where.value().target;
  if (where.value().stream) {
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::Error(Errno(path_));
    stream_ = true;
    return Status();
  }
  const size_t slash = target_.rfind('/');
  dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : target_.substr(0, slash));
  const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
  if (base.empty()) return Status::Error(path_ + ": not a file name");
#ifdef O_TMPFILE
  fd_ = force_named.load() ? -1 : ::open(dir_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ < 0 && force_named.load()) errno = EOPNOTSUPP;
  if (fd_ >= 0) {
    unnamed_ = true;
    return Status();
  }
  // ENOENT, EACCES, ENOTDIR: the directory is the problem, and the named
  // fallback would fail the same way; others: no O_TMPFILE here.
  if (errno == ENOENT || errno == EACCES || errno == ENOTDIR || errno == EROFS)
    return Status::Error(Errno(path_));
#endif
  std::string tmpl = TempName(dir_, base);
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd_ = mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0) return Status::Error(Errno(path_));
  fchmod(fd_, 0644);
  temp_ = buf.data();
  slot_ = ClaimSlot(temp_);
  return Status();
}

AtomicFile::~AtomicFile() {
  delete deflater_;
  if (fd_ >= 0) ::close(fd_);  // an unnamed file vanishes with its descriptor
  if (!committed_ && !temp_.empty()) unlink(temp_.c_str());
  ReleaseSlot(slot_);
}

Status AtomicFile::WriteRaw(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::Error(path_ + ": cannot write: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status();
}

Status AtomicFile::Write(std::string_view data) {
  if (!gzip_) return WriteRaw(data.data(), data.size());
  do {
    const size_t n = std::min(data.size(), kMaxIn);
    if (Status s = Deflate(data.substr(0, n), false); !s.ok()) return s;
    data.remove_prefix(n);
  } while (!data.empty());
  return Status();
}

Status AtomicFile::Deflate(std::string_view data, bool last) {
  isal_zstream& zs = deflater_->zs;
  // ISA-L reads the input without changing it; its field is not const.
  zs.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uint32_t>(data.size());
  zs.end_of_stream = last ? 1 : 0;
  for (;;) {
    zs.next_out = deflater_->out.data();
    zs.avail_out = static_cast<uint32_t>(deflater_->out.size());
    if (isal_deflate(&zs) != COMP_OK) return Status::Error(path_ + ": gzip compression failed");
    const size_t produced = deflater_->out.size() - zs.avail_out;
    if (Status s = WriteRaw(deflater_->out.data(), produced); !s.ok()) return s;
    // Done when the input is taken and the output had room to spare (and,
    // for the last input, the trailer is written).
    const bool ended =
        last ? zs.internal_state.state == ZSTATE_END : zs.avail_in == 0 && zs.avail_out > 0;
    if (ended) return Status();
  }
}

Status AtomicFile::Finish() {
  if (finished_) return Status();
  if (gzip_) {
    if (Status s = Deflate({}, true); !s.ok()) return s;
  }
  if (stream_) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Status::Error(Errno(path_));
    finished_ = true;
    committed_ = true;
    return Status();
  }
  if (fsync(fd_) != 0) return Status::Error(Errno(path_));
  finished_ = true;
  return Status();
}

Status AtomicFile::Publish() {
  if (committed_) return Status();
  if (!finished_) return Status::Error(path_ + ": cannot write: not finished");
  if (unnamed_) {
    // Linked in by its /proc name (linkat's AT_EMPTY_PATH needs a
    // capability). A new destination appears whole at once; an existing
    // one is replaced through a short-lived name and rename.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, target_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      if (errno != EEXIST) return Status::Error(Errno(path_));
      const size_t slash = target_.rfind('/');
      const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
      // A free name: mkstemp makes it, and it is removed again for linkat.
      std::string tmpl = TempName(dir_, base);
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      const int probe = mkostemp(buf.data(), O_CLOEXEC);
      if (probe < 0) return Status::Error(Errno(path_));
      ::close(probe);
      temp_ = buf.data();
      slot_ = ClaimSlot(temp_);
      unlink(temp_.c_str());
      if (linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, temp_.c_str(), AT_SYMLINK_FOLLOW) != 0)
        return Status::Error(Errno(path_));
      if (std::rename(temp_.c_str(), target_.c_str()) != 0) return Status::Error(Errno(path_));
    }
  } else if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
    return Status::Error(Errno(path_));
  }
  committed_ = true;
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::Error(Errno(path_));
  SyncDirectory(dir_);
  return Status();
}

Status WriteFileAtomically(const std::string& path, std::string_view data, bool gzip) {
  auto f = AtomicFile::Create(path, gzip);
  if (!f.ok()) return f.status();
  std::unique_ptr<AtomicFile> file(f.value());
  if (Status s = file->Write(data); !s.ok()) return s;
  return file->Commit();
}

}  // namespace memtl
