// PyTorch's raw memory timeline (raw_timeline.h).
#include "core/read/raw/raw_timeline.h"

#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/model/checked.h"
#include "core/model/quote.h"
#include "core/model/records.h"
#include "core/read/common/json_cursor.h"
#include "core/read/common/kineto_stream.h"

namespace memtl {

namespace {

// Epoch times in microseconds lie in [1e14, 1e17) (from 1973 to 5138);
// in nanoseconds they are above. PyTorch writes epoch times; a time below
// 1e14 (a test's) is taken as nanoseconds.
constexpr int64_t kMinEpochUs = 100'000'000'000'000;
constexpr int64_t kMaxEpochUs = 100'000'000'000'000'000;

int64_t Int(JsonCursor& c) {
  bool is_int = false, overflow = false;
  if (c.Peek() != JsonCursor::Kind::kNumber) throw std::runtime_error("expected an integer");
  const int64_t v = c.ReadInt64(&is_int, &overflow);
  if (!is_int || overflow) throw std::runtime_error("expected an integer");
  return v;
}

RawTimelineRow Row(std::string_view text) {
  JsonCursor c(text);
  if (c.Peek() != JsonCursor::Kind::kArray) throw std::runtime_error("expected a list");
  c.BeginArray();
  RawTimelineRow r;
  int64_t v[4] = {};
  int n = 0;
  while (c.NextItem()) {
    if (n == 4) throw std::runtime_error("more than 4 values");
    v[n++] = Int(c);
  }
  c.ExpectEnd();
  if (n != 4) throw std::runtime_error("fewer than 4 values");
  if (v[1] < 1 || v[1] > 4) throw std::runtime_error("action " + std::to_string(v[1]));
  if (v[3] < 0 || v[3] > 7) throw std::runtime_error("category " + std::to_string(v[3]));
  if (v[2] > kMaxAllocBytes || v[2] < -kMaxAllocBytes)
    throw std::runtime_error("bytes out of range");
  if (v[0] < -1) throw std::runtime_error("time " + std::to_string(v[0]));
  r.time = v[0];
  r.action = static_cast<uint8_t>(v[1]);
  r.bytes = v[2];
  r.category = static_cast<uint8_t>(v[3]);
  return r;
}

Expected<RawTimeline> Read(OpenedInput in, const ReadOptions& options, ReadInfo* info) {
  LineSource& src = *in.src;
  const std::string name = QuotePath(src.name());
  RawTimeline t;
  read::KinetoStream stream(src, std::move(in.head), options.progress);
  ReadInfo local;
  bool done = false;
  try {
    while (!done) {
      switch (stream.Next()) {
        case read::KinetoStream::Part::kEnd:
          done = true;
          break;
        case read::KinetoStream::Part::kMember:  // not in an array; the sniffer saw one
          return Status::Error(name + ": expected a list of [time, action, bytes, category]");
        case read::KinetoStream::Part::kEvent:
          try {
            t.rows.push_back(Row(stream.value()));
          } catch (const std::runtime_error& e) {
            return Status::Error(name + ": row " + std::to_string(stream.events()) + ": " +
                                 e.what() + " (rows are [time, action 1-4, bytes, category 0-7])");
          } catch (const JsonError& e) {
            return Status::Error(name + ": row " + std::to_string(stream.events()) +
                                 ": not valid JSON (" + e.what + ")");
          }
          break;
        case read::KinetoStream::Part::kCut: {
          const Status& s = src.status();
          const bool truncated = s.ok() || s.code() == StatusCode::kTruncated;
          if (!s.ok() && !(options.partial && truncated)) return s;
          if (!options.partial) {
            return Status::Error(name + ": the timeline is cut off after " +
                                 std::to_string(t.rows.size()) +
                                 " rows; use --partial to read the complete ones");
          }
          local.stopped_early = true;
          local.stopped_at_line = stream.line() + 1;
          done = true;
          break;
        }
      }
    }
  } catch (const read::KinetoStructureError& e) {
    return Status::Error(name + ": " + e.what());
  }
  bool any = false, us = true;
  for (const RawTimelineRow& r : t.rows) {
    if (r.time < 0) continue;
    any = true;
    us &= r.time >= kMinEpochUs && r.time < kMaxEpochUs;
  }
  if (any && us) {
    t.times_were_us = true;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      RawTimelineRow& r = t.rows[i];
      if (r.time < 0) continue;
      const std::optional<int64_t> ns = CheckedMul<int64_t>(r.time, 1000);
      if (!ns) {
        return Status::Error(name + ": row " + std::to_string(i + 1) + ": time " +
                             std::to_string(r.time) +
                             " in microseconds is past 2^63-1 nanoseconds (the year 2262)");
      }
      r.time = *ns;
    }
  }
  local.lines = stream.line();
  if (info != nullptr) *info = local;
  return t;
}

}  // namespace

Expected<RawTimeline> ReadRawTimelineInput(OpenedInput input, const ReadOptions& options,
                                           ReadInfo* info) {
  const std::string name = QuotePath(input.src->name());
  if (!options.et_path.empty())
    return Status::Error(name + ": --et goes with a Kineto trace, not a raw memory timeline");
  return OutOfMemoryIsAnError(name, [&] { return Read(std::move(input), options, info); });
}

}  // namespace memtl
