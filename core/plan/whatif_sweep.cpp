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

SweepResult Sweep(const std::vector<Span>& spans, DeviceIndex device,
                  const std::vector<Weights>& weights, int64_t lo, int64_t hi, int buckets,
                  const Stream& stream) {
  // 16 bytes: its bytes are its span's (a sweep holds two per span).
  struct Delta {
    int64_t time;
    uint32_t span;
    uint8_t cls;
    uint8_t cat;
    bool free;
  };
  // A row sums every change of its time, so the order within one is only
  // the tie-break of the event named at the peak. The spans come in
  // timeline order, so their starts are nearly sorted already: the starts
  // (first) and the ends (after them) are sorted apart (the starts' sort is
  // a check when no change moved one); the rows take from both, and from
  // the timeline's own events the spans leave out, in time order.
  auto before = [](const Delta& a, const Delta& b) {
    return a.time != b.time ? a.time < b.time : a.span < b.span;
  };
  size_t n_starts = 0, n_ends = 0;
  for (const Span& s : spans) {
    if (s.device != device || s.bytes == 0 || s.end <= s.start) continue;
    ++n_starts;
    n_ends += s.end != kNever ? 1 : 0;
  }
  std::vector<Delta> deltas(n_starts + n_ends);
  size_t at_start = 0, at_end = n_starts;
  for (uint32_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.device != device || s.bytes == 0 || s.end <= s.start) continue;
    const auto cat = static_cast<uint8_t>(s.category());
    deltas[at_start++] = {s.start, i, s.cls, cat, false};
    if (s.end != kNever) deltas[at_end++] = {s.end, i, s.cls, cat, true};
  }
  const auto mid = deltas.begin() + static_cast<std::ptrdiff_t>(n_starts);
  if (!std::is_sorted(deltas.begin(), mid, before)) std::sort(deltas.begin(), mid, before);
  std::sort(mid, deltas.end(), before);
  size_t i = 0, j = n_starts;  // the next start, the next end

  // The timeline's events of `device` that no span stands for.
  static const std::vector<TimelineEvent> kNoEvents;
  const std::vector<TimelineEvent>& timeline = stream.in ? stream.in->timeline : kNoEvents;
  size_t k = 0;
  auto streamed = [&](const TimelineEvent& e) {
    if (e.device != device) return false;
    if (!e.has_key()) {
      return e.action != Action::kIncrementVersion &&
             !stream.selection->unkeyed[static_cast<size_t>(ExportIndex(e.inferred()))];
    }
    const std::vector<bool>& key = stream.selection->key;
    return e.slot >= key.size() || !key[e.slot];
  };
  auto next_time = [&] {
    while (k < timeline.size() && !streamed(timeline[k])) ++k;
    int64_t t = kNever;
    if (i < n_starts) t = deltas[i].time;
    if (j < deltas.size()) t = std::min(t, deltas[j].time);
    if (k < timeline.size()) t = std::min(t, MicrosOf(timeline[k]));
    return t;
  };

  SweepResult r;
  r.peaks.resize(weights.size());
  constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();
  if (buckets > 0) r.curve.assign(static_cast<size_t>(buckets), kEmpty);
  // Running sums, exact in integers: per class (what the weights scale),
  // per category, and per class and category (the peak's categories).
  std::array<int64_t, kNumCls> sums{};
  std::array<int64_t, 8> cats{};
  std::array<std::array<int64_t, 8>, kNumCls> by{};
  auto add = [&](int cls, int cat, int64_t bytes) {
    sums[static_cast<size_t>(cls)] += bytes;
    cats[static_cast<size_t>(cat)] += bytes;
    by[static_cast<size_t>(cls)][static_cast<size_t>(cat)] += bytes;
  };
  std::vector<double> best(weights.size(), 0);
  std::vector<bool> seen(weights.size(), false);
  // Per weight set, `by` at its peak so far (weighted once, at the end).
  std::vector<std::array<std::array<int64_t, 8>, kNumCls>> by_at_peak(weights.size());
  std::array<bool, 8> category_seen{};
  bool first_found = false;
  for (int64_t t = next_time(); t != kNever; t = next_time()) {
    r.any = true;
    if (!first_found && t >= 0) {
      r.first_us = t;
      first_found = true;
    }
    // The event named if this row is a peak: a span's creator, or a
    // streamed event's version's.
    uint32_t event = kNone32;
    for (; i < n_starts && deltas[i].time == t; ++i) {
      add(deltas[i].cls, deltas[i].cat, spans[deltas[i].span].bytes);
      event = spans[deltas[i].span].creator;
    }
    for (; j < deltas.size() && deltas[j].time == t; ++j) {
      add(deltas[j].cls, deltas[j].cat, -spans[deltas[j].span].bytes);
      event = spans[deltas[j].span].creator;
    }
    const TimelineEvent* last = nullptr;
    for (; k < timeline.size() && MicrosOf(timeline[k]) == t; ++k) {
      const TimelineEvent& e = timeline[k];
      if (!streamed(e)) continue;
      const Version v = e.version();
      const int cat = CategoryIndexOf(stream.in->categories, e, v);
      switch (e.action) {
        case Action::kPreexisting:
        case Action::kCreate:
          add(cat, cat, e.bytes);
          break;
        case Action::kDestroy:
          add(cat, cat, -e.bytes);
          break;
        case Action::kIncrementVersion: {
          const int now = CategoryIndexOf(stream.in->categories, e, v.next());
          add(cat, cat, -e.bytes);
          add(now, now, e.bytes);
          break;
        }
      }
      last = &e;
    }
    for (int c = 0; c < 8; ++c) {
      if (!category_seen[c] || cats[c] > r.max_category[c]) {
        category_seen[c] = true;
        r.max_category[c] = cats[c];
        r.max_category_us[c] = t;
      }
    }
    for (size_t w = 0; w < weights.size(); ++w) {
      double total = 0;
      for (int c = 0; c < kNumCls; ++c) total += weights[w][c] * static_cast<double>(sums[c]);
      if (w == 0 && buckets > 0 && hi > lo) {
        const int64_t shown = t < 0 ? lo : t;
        const double f =
            static_cast<double>(std::clamp(shown, lo, hi) - lo) / static_cast<double>(hi - lo);
        const auto b =
            static_cast<size_t>(std::min<int64_t>(buckets - 1, static_cast<int64_t>(f * buckets)));
        r.curve[b] = std::max(r.curve[b], static_cast<int64_t>(std::llround(total)));
      }
      if (seen[w] && total <= best[w]) continue;
      seen[w] = true;
      best[w] = total;
      SweepPeak& p = r.peaks[w];
      p.time_us = t;
      p.event = event;
      if (last != nullptr && last->has_key()) {
        const Version v =
            last->action == Action::kIncrementVersion ? last->version().next() : last->version();
        p.event = CreatorOf(*stream.in, *stream.creator, last->key(), v);
      }
      by_at_peak[w] = by;
    }
  }
  if (!first_found && r.any) r.first_us = -1;
  // A bucket with no row of its own holds the memory of the row before it.
  int64_t held = 0;
  for (int64_t& b : r.curve) b = b == kEmpty ? held : (held = b);
  for (size_t w = 0; w < weights.size(); ++w) {
    SweepPeak& p = r.peaks[w];
    if (!(best[w] < 0x1p62) || best[w] < 0) {
      r.out_of_range = true;  // no number: the replay says so
      continue;
    }
    p.bytes = std::llround(best[w]);
    for (int c = 0; c < kNumCls; ++c) {
      for (int k2 = 0; k2 < 8; ++k2) {
        p.by_category[k2] += static_cast<int64_t>(
            std::llround(weights[w][c] * static_cast<double>(by_at_peak[w][c][k2])));
      }
    }
  }
  return r;
}

}  // namespace memtl::whatif
