// Output files that appear whole or not at all, and nothing else left
// behind, whatever stops the run:
// - where the file system supports it (Linux O_TMPFILE: ext4, xfs, btrfs,
//   tmpfs), bytes go to an unnamed file in the destination's directory,
//   which Commit syncs and links into place (under a short temporary name
//   renamed over an existing destination), then syncs the directory: a
//   killed run, SIGKILL and power loss included, leaves no file at all;
// - elsewhere to a named temporary file (`.NAME.tmp.XXXXXX`, shortened so
//   that it stays within the name limit when NAME does), which the
//   destructor removes and so does SIGINT, SIGTERM, SIGHUP or SIGPIPE
//   (InstallCleanupOnSignals), before the signal ends the process;
// - a destination that is no regular file (a named pipe, a terminal, a
//   device, a socket, /dev/stdout) is written as a stream, in place;
// - a symbolic link is followed: its target is replaced, and created when
//   it does not exist yet, as a shell's `>` does; the link stays;
// - "-" is standard output, written as a stream.
// A failed or interrupted run leaves any previous output intact. Several
// outputs of one run are published together: each is written and synced in
// full (Finish) before any replaces its destination (Publish).
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
  // Ends the gzip stream and syncs the file; a stream is closed. Nothing
  // is replaced yet.
  Status Finish();
  // Puts a finished file in place (a stream is in place already).
  Status Publish();
  Status Commit() {
    Status s = Finish();
    return s.ok() ? Publish() : s;
  }
  const std::string& path() const { return path_; }

 private:
  AtomicFile() = default;
  Status WriteRaw(const void* data, size_t n);
  // Compresses `data` (at most 2^32 - 1 bytes) and writes what comes out;
  // `last` ends the gzip stream.
  Status Deflate(std::string_view data, bool last);
  Status Open();
  std::string path_;      // as the user gave it, for messages
  std::string target_;    // the file replaced: path_, or the target of a link
  std::string dir_;       // target_'s directory
  std::string temp_;      // the named temporary file, when there is one
  int slot_ = -1;         // temp_'s entry in the signal handler's list
  bool unnamed_ = false;  // an O_TMPFILE file, linked in on Commit
  bool stream_ = false;   // written in place (no regular file)
  int fd_ = -1;
  bool gzip_ = false;
  bool finished_ = false;
  bool committed_ = false;
  struct Deflater;
  Deflater* deflater_ = nullptr;
};

// Where an output path writes, links followed.
struct OutputTarget {
  std::string target;   // the file written: the path, or the end of its links
  bool stream = false;  // no regular file: written in place
};

// Resolves `path` as AtomicFile does: a directory is refused, an existing
// file that is not regular is a stream (opened by the name given, so that
// /dev/stdout reaches a pipe), and a link is followed to its end, also when
// that end does not exist yet.
Expected<OutputTarget> ResolveOutput(const std::string& path);

// Removes the named temporary files of live AtomicFiles on SIGINT, SIGTERM,
// SIGHUP and SIGPIPE, then ends the process as the signal would have.
// Idempotent; the command installs it at start.
void InstallCleanupOnSignals();

// For tests: behave as on a file system without O_TMPFILE (named
// temporary files) when `named` is true.
void ForceNamedTemporaryFilesForTests(bool named);

// Writes `data` to `path` atomically (see AtomicFile).
Status WriteFileAtomically(const std::string& path, std::string_view data, bool gzip);

}  // namespace memtl
