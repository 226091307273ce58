// Output files that appear whole or not at all: bytes go to a temporary file
// in the destination directory, renamed over the destination only on Commit.
// A failed or interrupted run leaves any previous output intact.
#pragma once

#include <string>
#include <string_view>

#include "core/model/status.h"

namespace memtl {

class AtomicFile {
 public:
  // `gzip`: compress what is written (gzip format).
  static Expected<AtomicFile*> Create(const std::string& path, bool gzip);
  ~AtomicFile();  // removes the temporary file unless committed
  Status Write(std::string_view data);
  Status Commit();

 private:
  AtomicFile() = default;
  Status WriteRaw(const void* data, size_t n);
  std::string path_;
  std::string temp_;
  int fd_ = -1;
  bool gzip_ = false;
  bool committed_ = false;
  struct Deflater;
  Deflater* deflater_ = nullptr;
};

// Writes `data` to `path` atomically (see AtomicFile).
Status WriteFileAtomically(const std::string& path, std::string_view data, bool gzip);

}  // namespace memtl
