// The sweep of whatif (whatif_spans.h): the spans of one device, and the
// timeline's events they leave out, summed into the exports' rows in time
// order, with each weight set's peak and the chart's curve.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/plan/whatif_spans.h"

namespace memtl::whatif {

Weights Ones() {
  Weights w;
  w.fill(1.0);
  return w;
}

namespace {

// 16 bytes: its bytes are its span's (a sweep holds two per span).
struct Delta {
  int64_t time;
  uint32_t span;
  uint8_t cls;
  uint8_t cat;
  bool free;
};

// A row sums every change of its time, so the order within one is only
// the tie-break of the event named at the peak.
bool Before(const Delta& a, const Delta& b) {
  return a.time != b.time ? a.time < b.time : a.span < b.span;
}

// The spans of `device` as their starts (the first n_starts) and their
// ends, each part sorted. The spans come in timeline order, so their starts
// are nearly sorted already: the starts' sort is a check when no change
// moved one.
struct Deltas {
  std::vector<Delta> all;
  size_t n_starts = 0;
};
Deltas SortedDeltas(const std::vector<Span>& spans, DeviceIndex device) {
  Deltas d;
  size_t n_ends = 0;
  for (const Span& s : spans) {
    if (s.device != device || s.bytes == 0 || s.end <= s.start) continue;
    ++d.n_starts;
    n_ends += s.end != kNever ? 1 : 0;
  }
  d.all.resize(d.n_starts + n_ends);
  size_t at_start = 0, at_end = d.n_starts;
  for (uint32_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.device != device || s.bytes == 0 || s.end <= s.start) continue;
    const auto cat = static_cast<uint8_t>(s.category());
    d.all[at_start++] = {s.start, i, s.cls, cat, false};
    if (s.end != kNever) d.all[at_end++] = {s.end, i, s.cls, cat, true};
  }
  const auto mid = d.all.begin() + static_cast<std::ptrdiff_t>(d.n_starts);
  if (!std::is_sorted(d.all.begin(), mid, Before)) std::sort(d.all.begin(), mid, Before);
  std::sort(mid, d.all.end(), Before);
  return d;
}

// Running sums, exact in integers: per class (what the weights scale),
// per category, and per class and category (the peak's categories).
struct Sums {
  std::array<int64_t, kNumCls> cls{};
  std::array<int64_t, 8> cats{};
  std::array<std::array<int64_t, 8>, kNumCls> by{};
  void Add(int c, int cat, int64_t bytes) {
    cls[static_cast<size_t>(c)] += bytes;
    cats[static_cast<size_t>(cat)] += bytes;
    by[static_cast<size_t>(c)][static_cast<size_t>(cat)] += bytes;
  }
};

const std::vector<TimelineEvent>& TimelineOf(const Stream& stream) {
  static const std::vector<TimelineEvent> kNoEvents;
  return stream.in ? stream.in->timeline : kNoEvents;
}

// The rows in time order: they take from the starts, the ends, and the
// timeline's own events of `device` that no span stands for.
class Rows {
 public:
  Rows(const std::vector<Span>& spans, DeviceIndex device, const Stream& stream)
      : spans_(spans),
        device_(device),
        stream_(stream),
        deltas_(SortedDeltas(spans, device)),
        j_(deltas_.n_starts),
        timeline_(TimelineOf(stream)) {}

  // The next row's time; kNever after the last.
  int64_t NextTime() {
    while (k_ < timeline_.size() && !Streamed(timeline_[k_])) ++k_;
    int64_t t = kNever;
    if (i_ < deltas_.n_starts) t = deltas_.all[i_].time;
    if (j_ < deltas_.all.size()) t = std::min(t, deltas_.all[j_].time);
    if (k_ < timeline_.size()) t = std::min(t, MicrosOf(timeline_[k_]));
    return t;
  }

  // Adds the spans' starts and ends at `t`; returns the event named if this
  // row is a peak: the creator of the last span it changes.
  uint32_t AddSpans(int64_t t, Sums& sums) {
    uint32_t event = kNone32;
    const std::vector<Delta>& d = deltas_.all;
    for (; i_ < deltas_.n_starts && d[i_].time == t; ++i_) {
      sums.Add(d[i_].cls, d[i_].cat, spans_[d[i_].span].bytes);
      event = spans_[d[i_].span].creator;
    }
    for (; j_ < d.size() && d[j_].time == t; ++j_) {
      sums.Add(d[j_].cls, d[j_].cat, -spans_[d[j_].span].bytes);
      event = spans_[d[j_].span].creator;
    }
    return event;
  }

  // Adds the streamed events at `t`; returns the last of them (null: none),
  // whose version's creator is the event named if this row is a peak.
  const TimelineEvent* AddStreamed(int64_t t, Sums& sums) {
    const TimelineEvent* last = nullptr;
    for (; k_ < timeline_.size() && MicrosOf(timeline_[k_]) == t; ++k_) {
      const TimelineEvent& e = timeline_[k_];
      if (!Streamed(e)) continue;
      const Version v = e.version();
      const int cat = CategoryIndexOf(stream_.in->categories, e, v);
      switch (e.action) {
        case Action::kPreexisting:
        case Action::kCreate:
          sums.Add(cat, cat, e.bytes);
          break;
        case Action::kDestroy:
          sums.Add(cat, cat, -e.bytes);
          break;
        case Action::kIncrementVersion: {
          const int now = CategoryIndexOf(stream_.in->categories, e, v.next());
          sums.Add(cat, cat, -e.bytes);
          sums.Add(now, now, e.bytes);
          break;
        }
      }
      last = &e;
    }
    return last;
  }

 private:
  bool Streamed(const TimelineEvent& e) const {
    if (e.device != device_) return false;
    if (!e.has_key()) {
      return e.action != Action::kIncrementVersion &&
             !stream_.selection->unkeyed[static_cast<size_t>(ExportIndex(e.inferred()))];
    }
    const std::vector<bool>& key = stream_.selection->key;
    return e.slot >= key.size() || !key[e.slot];
  }

  const std::vector<Span>& spans_;
  DeviceIndex device_;
  const Stream& stream_;
  Deltas deltas_;
  size_t i_ = 0, j_;  // the next start, the next end
  const std::vector<TimelineEvent>& timeline_;
  size_t k_ = 0;  // the next timeline event
};

// Per weight set, the largest total so far, and `by` at it (weighted once,
// at the end).
struct Peaks {
  explicit Peaks(size_t n) : best(n, 0), seen(n, false), by_at_peak(n) {}
  std::vector<double> best;
  std::vector<bool> seen;
  std::vector<std::array<std::array<int64_t, 8>, kNumCls>> by_at_peak;
};

// Each category's largest, and the first row reaching it.
void NoteCategoryMax(const Sums& sums, int64_t t, std::array<bool, 8>& category_seen,
                     SweepResult& r) {
  for (int c = 0; c < 8; ++c) {
    if (!category_seen[c] || sums.cats[c] > r.max_category[c]) {
      category_seen[c] = true;
      r.max_category[c] = sums.cats[c];
      r.max_category_us[c] = t;
    }
  }
}

// Row `t`'s total under each weight set: weight set 0's into the curve's
// bucket, and each a peak where it is the largest so far.
void NoteRow(const Sums& sums, int64_t t, uint32_t event, const TimelineEvent* last,
             const std::vector<Weights>& weights, int64_t lo, int64_t hi, int buckets,
             const Stream& stream, Peaks& peaks, SweepResult& r) {
  for (size_t w = 0; w < weights.size(); ++w) {
    double total = 0;
    for (int c = 0; c < kNumCls; ++c) total += weights[w][c] * static_cast<double>(sums.cls[c]);
    if (w == 0 && buckets > 0 && hi > lo) {
      const int64_t shown = t < 0 ? lo : t;
      const double f =
          static_cast<double>(std::clamp(shown, lo, hi) - lo) / static_cast<double>(hi - lo);
      const auto b =
          static_cast<size_t>(std::min<int64_t>(buckets - 1, static_cast<int64_t>(f * buckets)));
      r.curve[b] = std::max(r.curve[b], static_cast<int64_t>(std::llround(total)));
    }
    if (peaks.seen[w] && total <= peaks.best[w]) continue;
    peaks.seen[w] = true;
    peaks.best[w] = total;
    SweepPeak& p = r.peaks[w];
    p.time_us = t;
    p.event = event;
    if (last != nullptr && last->has_key()) {
      const Version v =
          last->action == Action::kIncrementVersion ? last->version().next() : last->version();
      p.event = CreatorOf(*stream.in, *stream.creator, last->key(), v);
    }
    peaks.by_at_peak[w] = sums.by;
  }
}

// Each weight set's peak bytes and its bytes by category, weighted.
void FinishPeaks(const std::vector<Weights>& weights, const Peaks& peaks, SweepResult& r) {
  for (size_t w = 0; w < weights.size(); ++w) {
    SweepPeak& p = r.peaks[w];
    if (!(peaks.best[w] < 0x1p62) || peaks.best[w] < 0) {
      r.out_of_range = true;  // no number: the replay says so
      continue;
    }
    p.bytes = std::llround(peaks.best[w]);
    for (int c = 0; c < kNumCls; ++c) {
      for (int k = 0; k < 8; ++k) {
        p.by_category[k] += static_cast<int64_t>(
            std::llround(weights[w][c] * static_cast<double>(peaks.by_at_peak[w][c][k])));
      }
    }
  }
}

}  // namespace

SweepResult Sweep(const std::vector<Span>& spans, DeviceIndex device,
                  const std::vector<Weights>& weights, int64_t lo, int64_t hi, int buckets,
                  const Stream& stream) {
  Rows rows(spans, device, stream);
  SweepResult r;
  r.peaks.resize(weights.size());
  constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();
  if (buckets > 0) r.curve.assign(static_cast<size_t>(buckets), kEmpty);
  Sums sums;
  Peaks peaks(weights.size());
  std::array<bool, 8> category_seen{};
  bool first_found = false;
  for (int64_t t = rows.NextTime(); t != kNever; t = rows.NextTime()) {
    r.any = true;
    if (!first_found && t >= 0) {
      r.first_us = t;
      first_found = true;
    }
    // The event named if this row is a peak: a span's creator, or a
    // streamed event's version's.
    const uint32_t event = rows.AddSpans(t, sums);
    const TimelineEvent* last = rows.AddStreamed(t, sums);
    NoteCategoryMax(sums, t, category_seen, r);
    NoteRow(sums, t, event, last, weights, lo, hi, buckets, stream, peaks, r);
  }
  if (!first_found && r.any) r.first_us = -1;
  // A bucket with no row of its own holds the memory of the row before it.
  int64_t held = 0;
  for (int64_t& b : r.curve) b = b == kEmpty ? held : (held = b);
  FinishPeaks(weights, peaks, r);
  return r;
}

}  // namespace memtl::whatif
