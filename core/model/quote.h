// Quoting text that a trace or a file name put into a message. Every error
// and note is one line on stderr; text quoted from the input must not be able
// to break that line, move the cursor, recolour the terminal or hide part of
// the message, whatever bytes it holds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memtl {

// At most this many bytes of escaped trace text (a record kind, a device, an
// op name, a schema) go into a message. Operator names and devices fit whole
// (the longest built-in operator name, with its overload, is 67 bytes); a
// long schema keeps its start, which names the op, and its end. A message
// with a file name, a line number and its problem then still fits a
// 200-column line, and a 1 MB name gives the same short message.
inline constexpr size_t kQuoteMaxBytes = 100;

// Paths get more room: a deep absolute path stays whole, and so can be
// copied from the message, while PATH_MAX (4096 bytes) cannot swamp it.
inline constexpr size_t kPathQuoteMaxBytes = 300;

// Returns `text` in double quotes, escaped so that it reads back
// unambiguously and prints as one line:
//   \" and \\ for the quote and the backslash; \n \r \t; \xHH for the other
//   C0 controls, DEL and every byte that is not part of valid UTF-8 (a lone
//   continuation byte, a cut sequence, overlong forms, surrogates); \uHHHH for
//   the C1 controls (U+0080-U+009F: U+009B is CSI to some terminals), the
//   line and paragraph separators and the bidirectional overrides (which
//   reorder what follows them on the screen). Other valid UTF-8 is kept.
// Escaped text longer than `max_bytes` keeps its start and its end around
// "..." (never cutting an escape or a character), so a name's namespace and
// its tail both stay; the result is then at most `max_bytes` + 2 bytes long.
// Example: Quote("cpu\n\x1b[2J") == "\"cpu\\n\\x1b[2J\"".
std::string Quote(std::string_view text, size_t max_bytes = kQuoteMaxBytes);

// A file name as it appears at the start of `memtl: FILE: ...`: escaped as by
// Quote (a backslash too, so that an escape in a name is never mistaken for
// a real control character) but with no quotes around it and `"` kept.
std::string QuotePath(std::string_view path, size_t max_bytes = kPathQuoteMaxBytes);

// A name from a trace (an op, a module path, a parameter's name, a call
// site) as a cell of a text or TSV table: unchanged when it is printable
// ASCII without a backslash (nearly every name: no copy of its escaping is
// made), else escaped as QuotePath escapes, whole, so that a tab, a newline
// or a terminal escape in a trace cannot break a row or a column.
std::string TextCell(std::string_view name);

// The last guard where a message is printed: escapes what Quote escapes but
// the quote and the backslash, and shortens nothing, so that a message stays
// one line even where a site forgot to quote what it holds. Text quoted
// already passes unchanged (OneLine(Quote(x)) == Quote(x)).
std::string OneLine(std::string_view message);

// The length of the well-formed UTF-8 character at s[i] (1 to 4), or 0
// where s[i] starts none (a lone continuation byte, a cut sequence, an
// overlong form, a surrogate, past U+10FFFF).
size_t Utf8CharLength(std::string_view s, size_t i);

// U+FFFD, what a byte that is no part of valid UTF-8 becomes in an output
// that must be UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// How many bytes of `s` are no part of valid UTF-8.
size_t InvalidUtf8Bytes(std::string_view s);

// `s` with each byte that is no part of valid UTF-8 replaced by U+FFFD.
std::string ReplaceInvalidUtf8(std::string_view s);

// `s` as a JSON string literal, quotes included, appended to `out`: `"` and
// `\` escaped, control characters as \uHHHH, each byte that is no part of
// valid UTF-8 as \ufffd (JSON is UTF-8: a file name or a name from a
// foreign trace must not make the document invalid), valid UTF-8 as it is.
void AppendJsonString(std::string& out, std::string_view s);
inline std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

}  // namespace memtl
