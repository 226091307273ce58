// Line streaming over plain or gzip input; gzip is inflated by ISA-L.
#include "core/read/common/line_source.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

namespace memtl {

namespace {
// Compressed (or plain) bytes read from the file at a time. Small: the
// buffer is resident while the file is read, and reading more at once is
// no faster (a 64 KiB gzip chunk inflates to about 640 KiB of JSON).
constexpr size_t kChunk = 64 << 10;
// How far past the requested size ReadLines decodes, for the last line to
// end inside: about ten typical trace lines.
constexpr size_t kLineSlack = 4 << 10;
// Consumed input kept before the unread bytes: when ISA-L finds a member's
// trailer wrong, the trailer is the 8 bytes before where it stopped (which
// may have come in the previous chunk), and its CRC-32 tells which of the
// two checks failed.
constexpr size_t kTrailer = 8;
// A gzip member's fixed header: magic, method, flags, time, XFL, OS.
constexpr size_t kHeader = 10;
constexpr const char* kTruncated = "truncated gzip stream (the file ends inside a gzip member)";

uint32_t Le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// What ISA-L's error codes mean, in zlib's words where zlib has the same
// error (memtl used zlib before); ISA-L does not say which part of a block
// is invalid.
const char* InflateError(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK:  // a bad block type, stored length or code table
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER:
      return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD:
      return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM:
      return "header crc mismatch";  // the trailer's case is told apart by the caller
    default:
      return "unknown error";
  }
}
}  // namespace

// ISA-L's state is about 85 KiB (its window and Huffman tables): it lives
// on the heap, with the LineSource, never on a stack.
struct LineSource::Inflater {
  inflate_state state{};
  bool member_done = false;  // the current gzip member ended, its trailer checked
  void Start() {
    isal_inflate_reset(&state);
    // The gzip wrapper: ISA-L parses the header and checks the trailer's
    // CRC-32 and length itself.
    state.crc_flag = ISAL_GZIP;
    member_done = false;
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
  uint64_t size = Le32(tail);
  while (size + (uint64_t{1} << 31) < compressed * 10) size += uint64_t{1} << 32;
  return size;
}

bool LineSource::ReadRaw() {
  if (raw_eof_) return false;
  // Keep the unread bytes and the last kTrailer read ones, append a chunk.
  const size_t keep = std::min(raw_pos_, kTrailer);
  raw_.erase(raw_.begin(), raw_.begin() + static_cast<std::ptrdiff_t>(raw_pos_ - keep));
  raw_pos_ = keep;
  // Room for the kept bytes and a whole chunk, so the buffer is not
  // regrown by doubling when they come together.
  raw_.reserve(kChunk + 2 * kTrailer);
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

bool LineSource::Decode(std::string* out, size_t max) {
  if (!status_.ok()) return false;
  if (!sniffed_) {
    while (raw_.size() - raw_pos_ < 2 && ReadRaw()) {
    }
    if (!status_.ok()) return false;
    sniffed_ = true;
    gzip_ = raw_.size() - raw_pos_ >= 2 && raw_[raw_pos_] == 0x1f && raw_[raw_pos_ + 1] == 0x8b;
    if (gzip_) {
      inflater_ = std::make_unique<Inflater>();  // std::bad_alloc: the reader's "out of memory"
      isal_inflate_init(&inflater_->state);
      inflater_->member_done = true;  // the first member's header is checked as the next's
    }
  }
  if (!gzip_) {
    if (raw_pos_ == raw_.size() && !ReadRaw()) return false;
    const size_t n = std::min(max, raw_.size() - raw_pos_);
    out->append(reinterpret_cast<const char*>(raw_.data() + raw_pos_), n);
    raw_pos_ += n;
    return true;
  }
  // gzip: inflate into the end of `out` until some output is produced or
  // the input ends.
  inflate_state& st = inflater_->state;
  const size_t old = out->size();
  out->resize(old + max);
  const auto fail = [&](const std::string& what, StatusCode code = StatusCode::kBadInput) {
    out->resize(old);
    status_ = Status::Error(code, name_ + ": " + what);
    return false;
  };
  for (;;) {
    if (raw_pos_ == raw_.size()) {
      if (!ReadRaw()) {
        out->resize(old);
        if (!status_.ok()) return false;
        if (!inflater_->member_done)
          status_ = Status::Error(StatusCode::kTruncated, name_ + ": " + kTruncated);
        return false;
      }
    }
    if (inflater_->member_done) {
      // The first member, or another after it (concatenated gzip, as
      // `cat a.gz b.gz` makes: RFC 1952 allows it, and gzip reads it), or
      // bytes that are no member: its fixed header checked here, the rest
      // of the header and the trailer by ISA-L.
      while (raw_.size() - raw_pos_ < kHeader && ReadRaw()) {
      }
      if (!status_.ok()) {
        out->resize(old);
        return false;
      }
      const unsigned char* h = raw_.data() + raw_pos_;
      const size_t n = raw_.size() - raw_pos_;
      if (n < 2 || h[0] != 0x1f || h[1] != 0x8b)
        return fail("unexpected bytes after the end of the gzip stream");
      if (n < kHeader) return fail(kTruncated, StatusCode::kTruncated);
      // FLG's bits 5-7 are reserved: RFC 1952 has a reader refuse a member
      // that sets one (ISA-L ignores them).
      if ((h[3] & 0xe0) != 0) return fail("corrupt gzip data (reserved header flags set)");
      inflater_->Start();
    }
    const size_t avail = raw_.size() - raw_pos_;
    st.next_in = raw_.data() + raw_pos_;
    st.avail_in = static_cast<uint32_t>(avail);
    st.next_out = reinterpret_cast<uint8_t*>(out->data() + old);
    st.avail_out = static_cast<uint32_t>(max);
    const int rc = isal_inflate(&st);
    raw_pos_ = raw_.size() - st.avail_in;
    const size_t produced = max - st.avail_out;
    if (rc == ISAL_INCORRECT_CHECKSUM && st.block_state == ISAL_BLOCK_FINISH) {
      // The trailer (the 8 bytes ISA-L read last) disagrees: zlib's words
      // for which of its fields does.
      const bool crc_ok = raw_pos_ >= kTrailer && Le32(raw_.data() + raw_pos_ - kTrailer) == st.crc;
      return fail(std::string("corrupt gzip data (") +
                  (crc_ok ? "incorrect length check" : "incorrect data check") + ")");
    }
    if (rc < 0) return fail(std::string("corrupt gzip data (") + InflateError(rc) + ")");
    if (st.block_state == ISAL_BLOCK_FINISH) inflater_->member_done = true;
    if (produced > 0) {
      out->resize(old + produced);
      return true;
    }
    // Nothing produced: ISA-L wants more input (it consumed all it was
    // given), or the member just ended. Anything else would loop forever.
    if (st.avail_in == avail && !inflater_->member_done) {
      return fail("corrupt gzip data");
    }
  }
}

bool LineSource::ReadLines(std::string* out, size_t min_bytes) {
  if (done_) return false;
  const size_t start = out->size();
  const size_t end_min = start + std::max<size_t>(min_bytes, 1);  // the block's least end
  out->append(carry_);
  carry_.clear();
  // The block ends after the last '\n' at or past end_min - 1. Bytes before
  // `from` have been searched already (or are before end_min - 1).
  size_t from = end_min - 1;
  // Where the line being decoded begins: found once the block outgrows
  // max_line_ (npos until then).
  size_t line_begin = std::string::npos;
  for (;;) {
    if (out->size() > from) {
      if (const void* last = memrchr(out->data() + from, '\n', out->size() - from)) {
        const size_t cut = static_cast<size_t>(static_cast<const char*>(last) - out->data()) + 1;
        carry_.assign(out->data() + cut, out->size() - cut);
        out->resize(cut);
        return true;
      }
      from = out->size();
    }
    // Bytes from end_min - 1 on hold no '\n', so the line being decoded
    // began after the last one before there. Checked before every decode:
    // the line grows by at most one decode step past the limit.
    if (out->size() - start > max_line_) {
      if (line_begin == std::string::npos) {
        const size_t body_end = std::min(end_min - 1, out->size());
        const void* nl =
            body_end > start ? memrchr(out->data() + start, '\n', body_end - start) : nullptr;
        line_begin = nl != nullptr
                         ? static_cast<size_t>(static_cast<const char*>(nl) - out->data()) + 1
                         : start;
      }
      if (out->size() - line_begin > max_line_) {
        out->resize(line_begin + max_line_ + 1);
        unterminated_ = done_ = true;
        return true;
      }
    }
    // Decode up to a little past end_min, so that the block's last line
    // usually ends inside it; a line longer than that grows the step with
    // the block, up to kChunk times ten (about what one chunk of gzip input
    // inflates to).
    const size_t want = out->size() < end_min ? end_min - out->size() + kLineSlack
                        : out->size() - end_min < kLineSlack
                            ? kLineSlack
                            : std::min(out->size() - start, 10 * kChunk);
    // A line past 1 MiB gets room for the longest line at once: growing the
    // block by doubling would copy it, with both copies resident.
    if (out->size() + want > out->capacity() && out->size() - start >= (size_t{1} << 20)) {
      out->reserve(start + kLineSlack + max_line_ + 1 + 10 * kChunk +
                   std::max<size_t>(min_bytes, 1));
    }
    if (!Decode(out, want)) {
      done_ = true;
      if (status_.ok()) {
        unterminated_ = out->size() > start && out->back() != '\n';
      } else {
        // Hand out the whole lines decoded before the error, as when
        // reading stopped there.
        const char* base = out->data() + start;
        const void* last = memrchr(base, '\n', out->size() - start);
        out->resize(last != nullptr
                        ? static_cast<size_t>(static_cast<const char*>(last) - out->data()) + 1
                        : start);
      }
      return out->size() > start;
    }
  }
}

bool LineSource::ReadBytes(std::string* out, size_t max) {
  if (!carry_.empty()) {
    out->append(carry_);
    carry_.clear();
    return true;
  }
  if (done_) return false;
  if (Decode(out, max)) return true;
  done_ = true;
  return false;
}

}  // namespace memtl
