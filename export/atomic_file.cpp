// Atomic output with optional streaming gzip compression.
#include "export/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/util/crc32.h"

namespace memtl {

namespace {
// gzip level of compressed outputs (.raw.json.gz). Level 2 takes the 10^6
// event raw export from 1.0 to 0.81-0.85 s end to end for a file 23% larger
// (2.7 instead of 2.2 MB for 14.6 MB of JSON); the JSON inside is the same.
constexpr int kGzipLevel = 2;

// The gzip header zlib writes at level 2 on Unix: no name, no time, no
// extra flags, OS 3. memtl writes the header and trailer around a raw
// deflate stream itself, so that the trailer's CRC-32 is computed by Crc32
// (core/util/crc32.h) rather than by zlib's table method; the bytes are the
// ones zlib's gzip mode wrote.
constexpr unsigned char kGzipHeader[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};

void PutLe32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
}  // namespace

struct AtomicFile::Deflater {
  z_stream zs{};
  uint32_t crc = 0;   // of the uncompressed bytes so far
  uint32_t size = 0;  // their count, mod 2^32
};

Expected<AtomicFile*> AtomicFile::Create(const std::string& path, bool gzip) {
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->path_ = path;
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return Status::Error(path + ": not a file name");
  std::string tmpl = dir + "/." + base + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  f->fd_ = mkstemp(buf.data());
  if (f->fd_ < 0) return Status::Error(path + ": cannot write: " + std::strerror(errno));
  fchmod(f->fd_, 0644);
  f->temp_ = buf.data();
  f->gzip_ = gzip;
  if (gzip) {
    f->deflater_ = new Deflater();
    if (deflateInit2(&f->deflater_->zs, kGzipLevel, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
      return Status::Error(path + ": cannot initialize gzip");
    }
    if (Status s = f->WriteRaw(kGzipHeader, sizeof kGzipHeader); !s.ok()) return s;
  }
  return f.release();
}

AtomicFile::~AtomicFile() {
  if (deflater_ != nullptr) {
    deflateEnd(&deflater_->zs);
    delete deflater_;
  }
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !temp_.empty()) unlink(temp_.c_str());
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
  z_stream& zs = deflater_->zs;
  deflater_->crc = Crc32(deflater_->crc, data.data(), data.size());
  deflater_->size += static_cast<uint32_t>(data.size());
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  unsigned char out[1 << 16];
  do {
    zs.next_out = out;
    zs.avail_out = sizeof(out);
    deflate(&zs, Z_NO_FLUSH);
    if (Status s = WriteRaw(out, sizeof(out) - zs.avail_out); !s.ok()) return s;
  } while (zs.avail_out == 0);
  return Status();
}

Status AtomicFile::Commit() {
  if (gzip_) {
    z_stream& zs = deflater_->zs;
    unsigned char out[1 << 16];
    int rc;
    do {
      zs.next_out = out;
      zs.avail_out = sizeof(out);
      rc = deflate(&zs, Z_FINISH);
      if (Status s = WriteRaw(out, sizeof(out) - zs.avail_out); !s.ok()) return s;
    } while (rc != Z_STREAM_END);
    unsigned char trailer[8];
    PutLe32(trailer, deflater_->crc);
    PutLe32(trailer + 4, deflater_->size);
    if (Status s = WriteRaw(trailer, sizeof trailer); !s.ok()) return s;
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    return Status::Error(path_ + ": cannot write: " + std::strerror(errno));
  }
  fd_ = -1;
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    return Status::Error(path_ + ": cannot write: " + std::strerror(errno));
  }
  committed_ = true;
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
