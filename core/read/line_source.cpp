// Line streaming over plain or gzip input with zlib.
#include "core/read/line_source.h"

#include <zlib.h>

#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

namespace memtl {

namespace {
// Compressed (or plain) bytes read from the file at a time. Small: the
// buffer is resident while the file is read, and reading more at once is
// no faster (a 64 KiB gzip chunk inflates to about 640 KiB of JSON).
constexpr size_t kChunk = 64 << 10;
}  // namespace

struct LineSource::Inflater {
  z_stream zs{};
  bool initialized = false;
  bool member_done = false;  // the current gzip member ended cleanly
  ~Inflater() {
    if (initialized) inflateEnd(&zs);
  }
};

Expected<std::unique_ptr<LineSource>> LineSource::Open(const std::string& path) {
  std::unique_ptr<LineSource> src(new LineSource());
  src->name_ = path;
  src->file_ = std::fopen(path.c_str(), "rb");
  if (src->file_ == nullptr) {
    return Status::Error(path + ": cannot open: " + std::strerror(errno));
  }
  return src;
}

std::unique_ptr<LineSource> LineSource::FromMemory(std::string data, std::string name) {
  std::unique_ptr<LineSource> src(new LineSource());
  src->name_ = std::move(name);
  src->memory_ = std::move(data);
  return src;
}

LineSource::~LineSource() {
  if (file_ != nullptr) std::fclose(file_);
}

uint64_t LineSource::EstimatedSize() const {
  if (file_ == nullptr || !sniffed_) return 0;
  struct stat st {};
  if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return 0;
  const auto compressed = static_cast<uint64_t>(st.st_size);
  if (!gzip_) return compressed;
  unsigned char tail[4];
  if (compressed < 18 || pread(fileno(file_), tail, 4, st.st_size - 4) != 4) return 0;
  uint64_t size = uint64_t{tail[0]} | uint64_t{tail[1]} << 8 | uint64_t{tail[2]} << 16 |
                  uint64_t{tail[3]} << 24;
  while (size + (uint64_t{1} << 31) < compressed * 10) size += uint64_t{1} << 32;
  return size;
}

bool LineSource::ReadRaw() {
  if (raw_eof_) return false;
  // Keep unread bytes, append a new chunk.
  raw_.erase(raw_.begin(), raw_.begin() + static_cast<std::ptrdiff_t>(raw_pos_));
  raw_pos_ = 0;
  const size_t old = raw_.size();
  const size_t want = file_ != nullptr ? kChunk : std::min(kChunk, memory_.size() - memory_pos_);
  raw_.resize(old + want);
  size_t got = 0;
  if (file_ != nullptr) {
    got = std::fread(raw_.data() + old, 1, kChunk, file_);
    if (got < kChunk) {
      if (std::ferror(file_)) {
        status_ = Status::Error(name_ + ": read error: " + std::strerror(errno));
        raw_.resize(old);
        raw_eof_ = true;
        return false;
      }
      raw_eof_ = true;
    }
  } else {
    got = want;
    if (got > 0) std::memcpy(raw_.data() + old, memory_.data() + memory_pos_, got);
    memory_pos_ += got;
    if (memory_pos_ == memory_.size()) raw_eof_ = true;
  }
  raw_.resize(old + got);
  return got > 0;
}

bool LineSource::Fill() {
  if (!status_.ok()) return false;
  if (!sniffed_) {
    while (raw_.size() - raw_pos_ < 2 && ReadRaw()) {
    }
    if (!status_.ok()) return false;
    sniffed_ = true;
    gzip_ = raw_.size() - raw_pos_ >= 2 && raw_[raw_pos_] == 0x1f && raw_[raw_pos_ + 1] == 0x8b;
    if (gzip_) {
      inflater_ = std::make_unique<Inflater>();
      if (inflateInit2(&inflater_->zs, 15 + 16) != Z_OK) {
        status_ = Status::Error(name_ + ": cannot initialize gzip decoder");
        return false;
      }
      inflater_->initialized = true;
    }
  }
  if (!gzip_) {
    if (raw_pos_ == raw_.size() && !ReadRaw()) return false;
    buf_.append(reinterpret_cast<const char*>(raw_.data() + raw_pos_), raw_.size() - raw_pos_);
    raw_pos_ = raw_.size();
    return true;
  }
  // gzip: inflate until some output is produced or input ends.
  z_stream& zs = inflater_->zs;
  char out[1 << 16];
  for (;;) {
    if (raw_pos_ == raw_.size()) {
      if (!ReadRaw()) {
        if (!status_.ok()) return false;
        if (!inflater_->member_done) {
          status_ =
              Status::Error(name_ + ": truncated gzip stream (the file ends inside a gzip member)");
        }
        return false;
      }
    }
    if (inflater_->member_done) {
      // Another member follows (concatenated gzip), or trailing garbage.
      if (raw_[raw_pos_] != 0x1f) {
        status_ = Status::Error(name_ + ": unexpected bytes after the end of the gzip stream");
        return false;
      }
      inflateReset(&zs);
      inflater_->member_done = false;
    }
    zs.next_in = raw_.data() + raw_pos_;
    zs.avail_in = static_cast<uInt>(raw_.size() - raw_pos_);
    zs.next_out = reinterpret_cast<Bytef*>(out);
    zs.avail_out = sizeof(out);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    raw_pos_ = raw_.size() - zs.avail_in;
    const size_t produced = sizeof(out) - zs.avail_out;
    if (rc == Z_STREAM_END) {
      inflater_->member_done = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status_ =
          Status::Error(name_ + ": corrupt gzip data (" +
                        (zs.msg != nullptr ? std::string(zs.msg)
                                           : std::string("zlib error ") + std::to_string(rc)) +
                        ")");
      return false;
    }
    if (produced > 0) {
      buf_.append(out, produced);
      return true;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in > 0) {
      status_ = Status::Error(name_ + ": corrupt gzip data");
      return false;
    }
  }
}

bool LineSource::ReadLines(std::string* out, size_t min_bytes) {
  if (done_) return false;
  const size_t start = out->size();
  for (;;) {
    // Move every whole line decoded so far.
    if (buf_pos_ < buf_.size()) {
      const char* base = buf_.data() + buf_pos_;
      const size_t n = buf_.size() - buf_pos_;
      if (const void* last = memrchr(base, '\n', n)) {
        const size_t take = static_cast<size_t>(static_cast<const char*>(last) - base) + 1;
        out->append(base, take);
        buf_pos_ += take;
        if (out->size() - start >= min_bytes) return true;
      }
    }
    if (buf_pos_ > 0) {  // keep only the partial line
      buf_.erase(0, buf_pos_);
      buf_pos_ = 0;
    }
    if (!Fill()) {
      done_ = true;
      if (status_.ok() && !buf_.empty()) {
        unterminated_ = true;
        out->append(buf_);
        buf_.clear();
      }
      return out->size() > start;
    }
  }
}

}  // namespace memtl
