// Measuring runs for memtl fit, and its outputs (runs.h).
#include "core/plan/runs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "core/explain/context.h"
#include "core/explain/peak.h"
#include "core/model/quote.h"
#include "core/pipeline/analysis.h"

namespace memtl {

namespace {

// The dimensions of a shape as memtl prints it ("[32, 64] float32").
std::vector<int64_t> Dims(std::string_view shape) {
  std::vector<int64_t> dims;
  if (!shape.starts_with('[')) return dims;
  size_t i = 1;
  while (i < shape.size() && shape[i] != ']') {
    int64_t v = 0;
    bool digits = false;
    while (i < shape.size() && shape[i] >= '0' && shape[i] <= '9') {
      v = v * 10 + (shape[i++] - '0');
      digits = true;
      if (v > (int64_t{1} << 40)) return {};
    }
    if (!digits) return {};
    dims.push_back(v);
    while (i < shape.size() && (shape[i] == ',' || shape[i] == ' ')) ++i;
  }
  return dims;
}

// A predicted peak in bytes; none where the fit goes below zero or past
// what int64 holds: an error to say, never a number.
std::optional<int64_t> PredictedBytes(const DeviceFit& d, double s) {
  const double v = PredictPeak(d, s);
  if (!std::isfinite(v) || v < 0 || v >= 9.2e18) return std::nullopt;
  return std::llround(v);
}

// A coefficient in bytes, as a size where it is one.
std::string CoefficientBytes(double v) {
  if (!std::isfinite(v) || std::abs(v) >= 9.2e18) return "(out of range)";
  return HumanBytes(std::llround(v));
}

const char* Unit(FitBy by) { return by == FitBy::kBatch ? "batch" : "sequence length"; }

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Expected<RunPeak> MeasureRun(const std::string& path, FitBy by, std::optional<double> scale) {
  PipelineOptions options;
  options.read.keep_shapes = true;
  auto c = RunPipeline(path, options);
  if (!c.ok()) return c.status();
  const Categorized& cat = *c.value();
  const Analysis& a = *cat.analysis;
  RunPeak run;
  run.name = QuotePath(path);
  if (scale) {
    run.scale = *scale;
  } else {
    // The largest input's dimension: a batch of token ids or images.
    int64_t best_bytes = -1;
    int64_t found = 0;
    const size_t dim = by == FitBy::kBatch ? 0 : 1;
    for (const KeySlot k : a.keys.slots()) {
      if (cat.categories.Get(k, Version(0)) != Category::kInput) continue;
      if (k.value() >= a.key_shapes.size() || a.key_shapes[k.value()] == kNone32) continue;
      const std::vector<int64_t> dims = Dims(a.trace.shapes.Get(a.key_shapes[k.value()]));
      if (dims.size() <= dim) continue;
      const int64_t bytes = (*a.sizes)[k];
      if (bytes > best_bytes) {
        best_bytes = bytes;
        found = dims[dim];
      }
    }
    if (found <= 0) {
      return Status::Error(run.name + ": no input tensor shows its " + Unit(by) +
                           " (no INPUT with a shape of " + (dim == 0 ? "one" : "two") +
                           " or more dimensions): give it with --scale");
    }
    run.scale = static_cast<double>(found);
  }
  // The phase at a time: that of the top-level op that started last at or
  // before it (as the report's chart names the op running at each point).
  std::vector<std::pair<int64_t, uint32_t>> starts;
  for (const FlowNode& n : a.graph->nodes()) {
    if (a.trace.events[n.event].kind != EventKind::kAlloc)
      starts.emplace_back(a.trace.event_t0[n.event], n.event);
  }
  std::stable_sort(starts.begin(), starts.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::unordered_map<uint32_t, size_t> phase_of_event;
  auto phase_at = [&](int64_t t) -> size_t {
    const auto it = std::upper_bound(
        starts.begin(), starts.end(), t,
        [](int64_t v, const std::pair<int64_t, uint32_t>& s) { return v < s.first; });
    if (it == starts.begin()) return 3;  // before any op: other
    const uint32_t event = std::prev(it)->second;
    const auto [at, added] = phase_of_event.try_emplace(event, 3);
    if (added) {
      const std::string phase = ContextOf(a.trace, *a.tree, event).phase;
      for (size_t p = 0; p < kPhases.size(); ++p) {
        if (phase == kPhases[p]) at->second = p;
      }
    }
    return at->second;
  };
  for (size_t d = 0; d < a.trace.devices.size(); ++d) {
    const PeakReport p = FindPeak(cat.timeline, cat.categories, static_cast<DeviceIndex>(d));
    if (!p.any) continue;
    RunPeak::Device dev;
    dev.name = a.trace.devices[d].name;
    dev.peak = p.bytes;
    dev.by_category = p.by_category;
    // The total after each row (events of one microsecond), by the phase
    // running then.
    int64_t total = 0, row = 0, last_ns = -1;
    bool open = false;
    auto close_row = [&] {
      if (!open) return;
      const size_t phase = last_ns < 0 ? 3 : phase_at(last_ns);
      dev.phase_peak[phase] = std::max(dev.phase_peak[phase], total);
    };
    for (const TimelineEvent& e : cat.timeline) {
      if (e.device != d) continue;
      const int64_t us = MicrosOf(e);
      if (open && us != row) close_row();
      open = true;
      row = us;
      last_ns = e.time;
      if (e.action == Action::kDestroy) total -= e.bytes;
      if (e.action == Action::kCreate || e.action == Action::kPreexisting) total += e.bytes;
    }
    close_row();
    run.devices.push_back(dev);
  }
  return run;
}

Expected<FitReport> FitTraces(const std::vector<std::string>& paths, FitBy by,
                              const std::vector<double>& scales) {
  if (!scales.empty() && scales.size() != paths.size()) {
    return Status::Error("--scale gives " + std::to_string(scales.size()) + " scales for " +
                         std::to_string(paths.size()) + " traces: give one per trace, in order");
  }
  std::vector<RunPeak> runs;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto run =
        MeasureRun(paths[i], by, scales.empty() ? std::nullopt : std::optional<double>(scales[i]));
    if (!run.ok()) return run.status();
    runs.push_back(std::move(run.value()));
  }
  return FitPeaks(runs, by);
}

std::string FormatFit(const FitReport& fit, const FitQuestion& q) {
  std::string out = "peak memory against " + std::string(Unit(fit.by)) + ", " +
                    std::to_string(fit.scales.size()) + " runs (";
  for (size_t i = 0; i < fit.scales.size(); ++i) out += (i ? ", " : "") + Num(fit.scales[i]);
  out += ")\n";
  const char* s = fit.by == FitBy::kBatch ? "b" : "s";
  for (const DeviceFit& d : fit.devices) {
    // The curve shown: the phase that sets the peak where the question is
    // (--at, else the largest run).
    const double where = q.at ? std::max(*q.at, fit.max_scale_measured) : fit.max_scale_measured;
    const Curve* shown = &d.peak;
    std::string phase;
    for (size_t p = 0; p < kPhases.size(); ++p) {
      if (d.phase[p] && (phase.empty() || d.phase[p]->At(where) > shown->At(where))) {
        shown = &*d.phase[p];
        phase = kPhases[p];
      }
    }
    const Curve& c = *shown;
    out += d.device + ": peak = " + CoefficientBytes(c.c[0]) + " + " + CoefficientBytes(c.c[1]) +
           " x " + s;
    if (fit.by == FitBy::kSequence && c.c[2] != 0) out += " + " + Num(c.c[2]) + " B x " + s + "^2";
    if (fit.by == FitBy::kSequence && c.c[2] == 0) out += " (a line: the runs need no square term)";
    if (!phase.empty()) out += ", set in the " + phase + (phase == "other" ? " phase" : "");
    char buf[96];
    std::snprintf(buf, sizeof buf, " (largest miss %.1f%%)\n", 100 * d.peak.max_relative_residual);
    out += buf;
    if (d.poor)
      out += "  poor fit: a run lies more than 5% from it; predictions from it are rough\n";
    if (q.at) {
      const std::optional<int64_t> bytes = PredictedBytes(d, *q.at);
      out += "  at " + std::string(Unit(fit.by)) + " " + Num(*q.at) + ": " +
             (bytes ? HumanBytes(*bytes)
                    : std::string("no prediction (the fit goes below zero or past 2^63 bytes "
                                  "there)"));
      if (*q.at > 2 * fit.max_scale_measured)
        out += " (extrapolated " + Num(*q.at / fit.max_scale_measured) + "x past the largest run)";
      out += "\n";
    }
    if (q.budget) {
      const auto m = MaxScaleWithin(d, *q.budget);
      out +=
          "  largest " + std::string(Unit(fit.by)) + " within " + HumanBytes(*q.budget) + ": " +
          (m ? std::to_string(*m) +
                   (static_cast<double>(*m) > 2 * fit.max_scale_measured ? " (extrapolated)" : "")
             : std::string(PredictPeak(d, 1) > static_cast<double>(*q.budget)
                               ? "none (even 1 goes over)"
                               : "any (the peak does not grow with it)")) +
          "\n";
    }
  }
  return out;
}

std::string FitJson(const FitReport& fit, const FitQuestion& q) {
  std::string out = std::string("{\"by\":") + (fit.by == FitBy::kBatch ? "\"batch\"" : "\"seq\"") +
                    ",\"scales\":[";
  for (size_t i = 0; i < fit.scales.size(); ++i) out += (i ? "," : "") + Num(fit.scales[i]);
  out += "],\"devices\":[";
  for (size_t i = 0; i < fit.devices.size(); ++i) {
    const DeviceFit& d = fit.devices[i];
    out += (i ? "," : "") + std::string("{\"device\":") + JsonString(d.device) +
           ",\"coefficients\":[" + Num(d.peak.c[0]) + "," + Num(d.peak.c[1]) + "," +
           Num(d.peak.c[2]) + "],\"max_relative_residual\":" + Num(d.peak.max_relative_residual) +
           ",\"poor\":" + (d.poor ? "true" : "false") + ",\"phases\":{";
    bool first = true;
    for (size_t p = 0; p < kPhases.size(); ++p) {
      if (!d.phase[p]) continue;
      out += (first ? "" : ",") + JsonString(kPhases[p]) + ":[" + Num(d.phase[p]->c[0]) + "," +
             Num(d.phase[p]->c[1]) + "," + Num(d.phase[p]->c[2]) + "]";
      first = false;
    }
    out += "}";
    if (q.at) {
      const std::optional<int64_t> bytes = PredictedBytes(d, *q.at);
      out += ",\"at\":" + Num(*q.at) +
             ",\"predicted_peak_bytes\":" + (bytes ? std::to_string(*bytes) : std::string("null")) +
             ",\"extrapolated\":" + (*q.at > 2 * fit.max_scale_measured ? "true" : "false");
    }
    if (q.budget) {
      const auto m = MaxScaleWithin(d, *q.budget);
      out += ",\"budget_bytes\":" + std::to_string(*q.budget) +
             ",\"max_scale\":" + (m ? std::to_string(*m) : std::string("null"));
    }
    out += "}";
  }
  return out + "]}\n";
}

}  // namespace memtl
