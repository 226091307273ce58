// What the memtl command says while it runs: the progress line while it
// reads and analyzes, one-line messages on standard error, and its answer
// on standard output, written past stdio and closed, a failure there a
// status. Messages go through stdio, not iostreams (CLI11 itself prints
// only help).
#pragma once

#include <string>

#include "core/model/diagnostics.h"
#include "core/model/progress.h"

namespace memtl::cli {

// The status when standard output's reader has gone (`memtl graph | head
// -1`): memtl stops quietly, as a process ended by SIGPIPE, which a shell
// reports as 128 + 13. SIGPIPE itself ends memtl first (the signal handler
// removes temporary files and re-raises it); this is the status where the
// signal does not come, when the parent blocked it.
inline constexpr int kStdoutGoneStatus = 141;

// What the readers and the command report progress to.
Progress& CommandProgress();
// Shows CommandProgress() on standard error for `name` (cli/progress_line.h)
// when `enabled`, in place of any line shown before.
void ShowProgress(const std::string& name, bool enabled);
// Erases the progress line for good.
void StopProgress();
// Erases the progress line until its next tick: before anything else goes
// to standard error.
void ClearProgress();

// One line on standard error: `line` is kept so by OneLine whatever it
// quotes.
void PrintErrLine(const std::string& line);
// "memtl: MESSAGE" on standard error; the status of an error, 2.
int Fail(const std::string& message);
// A "memtl: note:" line per kind of diagnostic.
void PrintNotes(const Diagnostics& diag);

// Fails as every output does when standard output cannot take what is
// written (errno `err`); kStdoutGoneStatus without a word when its reader
// has gone.
int StdoutError(int err);
// A command's whole output on standard output, written and closed; 0 or
// StdoutError's status.
int Emit(const std::string& text);
// After --help and --version, which CLI11 prints with iostreams: `rc`, or
// StdoutError's status when they could not be written.
int FlushHelp(int rc);

}  // namespace memtl::cli
