// Streams the lines of a file that is plain text or gzip (possibly several
// concatenated members), detected by the magic bytes, never by name. Memory is
// bounded by the longest line plus one read buffer, and a line is never read
// past kMaxLineBytes: endless input (/dev/zero, a gigabyte line inflated from
// a megabyte of gzip) stops there instead of growing until memory runs out.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/status.h"

namespace memtl {

// No line may be longer (docs/trace-format.md, "Limits of this reader").
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

class LineSource {
 public:
  // Opens `path`; the status names the file when it cannot be read.
  static Expected<std::unique_ptr<LineSource>> Open(const std::string& path);
  // Reads from memory (tests, fuzzers); `name` is used in messages.
  static std::unique_ptr<LineSource> FromMemory(std::string data, std::string name);
  ~LineSource();

  // Appends whole lines (each with its '\n') to `out` until it has grown by
  // at least `min_bytes` or the input ends. Returns false when nothing was
  // appended: the end of input or an error, which status() tells apart. A
  // last line with no '\n' is appended as it is, with
  // `last_line_unterminated()` true. Bytes are decoded straight into `out`,
  // a little past `min_bytes`; the partial line after the last '\n' is kept
  // for the next call.
  //
  // A line longer than max_line() is not read whole: its first
  // max_line() + 1 bytes end the last block, unterminated, and reading
  // stops there (status() stays ok).
  //
  // Memory that runs out (for the gzip decoder's state too) throws
  // std::bad_alloc, which the reader turns into its "out of memory" line.
  bool ReadLines(std::string* out, size_t min_bytes);
  // Appends decoded bytes to `out` with no regard for lines: the bytes
  // ReadLines kept after the last line it handed out, else at most `max`
  // (> 0) newly decoded ones. For inputs cut by their own syntax (Kineto
  // traces, execution traces, raw timelines), which may hold everything on
  // one line. Returns false when nothing was appended, as ReadLines does.
  bool ReadBytes(std::string* out, size_t max);
  size_t max_line() const { return max_line_; }
  void set_max_line(size_t bytes) { max_line_ = bytes; }  // tests
  const Status& status() const { return status_; }
  bool last_line_unterminated() const { return unterminated_; }
  // A guess at the decoded size of a file, for reserving memory (0: no
  // guess): a plain file's size; for gzip, the size its trailer records
  // (modulo 2^32, so wraps are guessed from a typical JSON ratio of 10).
  // Meaningful once reading has begun.
  uint64_t EstimatedSize() const;
  const std::string& name() const { return name_; }

 private:
  LineSource() = default;
  // Appends at most `max` (> 0) decoded bytes to `out`, at least one unless
  // it returns false: at the end or on an error.
  bool Decode(std::string* out, size_t max);
  bool ReadRaw();

  std::string name_;
  FILE* file_ = nullptr;
  std::string memory_;  // FromMemory input
  size_t memory_pos_ = 0;
  bool gzip_ = false;
  bool sniffed_ = false;
  bool raw_eof_ = false;
  bool done_ = false;
  bool unterminated_ = false;
  size_t max_line_ = kMaxLineBytes;
  Status status_;
  std::vector<unsigned char> raw_;  // compressed or plain input not yet used
  size_t raw_pos_ = 0;
  std::string carry_;  // decoded bytes after the last '\n' handed out
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

}  // namespace memtl
