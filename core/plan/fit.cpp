// Least-squares fits of peak memory against scale (fit.h).
#include "core/plan/fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <set>

namespace memtl {

namespace {

// Fits y = c0 + c1 s (+ c2 s^2) by least squares.
Curve FitCurve(const std::vector<double>& s, const std::vector<double>& y, int terms) {
  const auto n = static_cast<Eigen::Index>(s.size());
  Eigen::MatrixXd a(n, terms);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double x = s[static_cast<size_t>(i)];
    a(i, 0) = 1;
    a(i, 1) = x;
    if (terms == 3) a(i, 2) = x * x;
    b(i) = y[static_cast<size_t>(i)];
  }
  const Eigen::VectorXd c = a.colPivHouseholderQr().solve(b);
  Curve curve;
  for (int k = 0; k < terms; ++k) curve.c[static_cast<size_t>(k)] = c(k);
  for (size_t i = 0; i < s.size(); ++i) {
    if (y[i] <= 0) continue;
    curve.max_relative_residual =
        std::max(curve.max_relative_residual, std::abs(curve.At(s[i]) - y[i]) / y[i]);
  }
  return curve;
}

// By sequence length the square term must earn its place: three runs
// always lie on some parabola, so a square fitted to them is no evidence
// of one, and a spurious one grows fast past them. The line stands where
// it explains every run within kLineFit; only where it misses more does
// the parabola.
constexpr double kLineFit = 0.02;

Curve FitModel(const std::vector<double>& s, const std::vector<double>& y, int terms) {
  if (terms == 3) {
    Curve line = FitCurve(s, y, 2);
    if (line.max_relative_residual <= kLineFit) return line;
  }
  return FitCurve(s, y, terms);
}

}  // namespace

Expected<FitReport> FitPeaks(const std::vector<RunPeak>& runs, FitBy by) {
  const int terms = by == FitBy::kBatch ? 2 : 3;
  const char* what = by == FitBy::kBatch ? "batch sizes" : "sequence lengths";
  std::set<double> distinct;
  for (const RunPeak& r : runs) {
    if (!(r.scale > 0))
      return Status::Error(r.name + ": its scale must be a positive number, not " +
                           std::to_string(r.scale));
    distinct.insert(r.scale);
  }
  if (static_cast<int>(distinct.size()) < terms) {
    return Status::Error("fit needs runs at " + std::to_string(terms) + " or more different " +
                         what + " (a " + (terms == 2 ? "line" : "parabola") + " has " +
                         std::to_string(terms) + " coefficients); got " +
                         std::to_string(distinct.size()));
  }
  FitReport report;
  report.by = by;
  for (const RunPeak& r : runs) report.scales.push_back(r.scale);
  report.max_scale_measured = *distinct.rbegin();
  for (const RunPeak::Device& d : runs.front().devices) {
    std::vector<const RunPeak::Device*> per_run;
    for (const RunPeak& r : runs) {
      const auto it = std::find_if(r.devices.begin(), r.devices.end(),
                                   [&](const RunPeak::Device& x) { return x.name == d.name; });
      if (it == r.devices.end()) break;
      per_run.push_back(&*it);
    }
    if (per_run.size() != runs.size()) continue;  // not every run has it
    // One model: its parameters do not change with the scale.
    constexpr int kParameter = 0;
    for (size_t i = 1; i < per_run.size(); ++i) {
      const auto p0 = static_cast<double>(per_run[0]->by_category[kParameter]);
      const auto pi = static_cast<double>(per_run[i]->by_category[kParameter]);
      if (std::abs(pi - p0) > 0.01 * std::max(p0, pi)) {
        return Status::Error(runs[i].name + " and " + runs[0].name + " hold " +
                             std::to_string(per_run[i]->by_category[kParameter]) + " and " +
                             std::to_string(per_run[0]->by_category[kParameter]) +
                             " bytes of parameters on " + d.name +
                             ": runs of different models cannot be fitted together");
      }
    }
    DeviceFit fit;
    fit.device = d.name;
    std::vector<double> y(runs.size());
    for (size_t i = 0; i < runs.size(); ++i) y[i] = static_cast<double>(per_run[i]->peak);
    fit.peak = FitModel(report.scales, y, terms);
    for (size_t p = 0; p < kPhases.size(); ++p) {
      bool all = true;
      for (size_t i = 0; i < runs.size(); ++i) {
        y[i] = static_cast<double>(per_run[i]->phase_peak[p]);
        all = all && per_run[i]->phase_peak[p] > 0;
      }
      if (all) fit.phase[p] = FitModel(report.scales, y, terms);
    }
    // The miss that matters is the prediction's: the phases' maximum.
    double miss = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto measured = static_cast<double>(per_run[i]->peak);
      if (measured > 0)
        miss = std::max(miss, std::abs(PredictPeak(fit, report.scales[i]) - measured) / measured);
    }
    fit.peak.max_relative_residual = miss;
    for (size_t c = 0; c < 8; ++c) {
      for (size_t i = 0; i < runs.size(); ++i)
        y[i] = static_cast<double>(per_run[i]->by_category[c]);
      fit.category[c] = FitCurve(report.scales, y, terms);
    }
    fit.poor = fit.peak.max_relative_residual > kPoorFit;
    report.devices.push_back(std::move(fit));
  }
  if (report.devices.empty()) return Status::Error("the runs share no device with memory events");
  return report;
}

double PredictPeak(const DeviceFit& d, double s) {
  bool any = false;
  double best = 0;
  for (const auto& c : d.phase) {
    if (!c) continue;
    best = any ? std::max(best, c->At(s)) : c->At(s);
    any = true;
  }
  return any ? best : d.peak.At(s);
}

std::optional<int64_t> MaxScaleWithin(const DeviceFit& d, int64_t budget) {
  // A scale exactly at the budget fits: the fitted coefficients carry
  // rounding a byte's fraction cannot matter to.
  const double b = static_cast<double>(budget) * (1 + 1e-12) + 1e-6;
  if (PredictPeak(d, 1) > b) return std::nullopt;
  // The peak grows with the scale where it matters (past the measured
  // runs); a curve that does not grow has no largest scale.
  bool grows = d.peak.c[1] > 0 || d.peak.c[2] > 0;
  for (const auto& c : d.phase) grows = grows || (c && (c->c[1] > 0 || c->c[2] > 0));
  if (!grows) return std::nullopt;
  // Double, then bisect, on integers: the curve is increasing from 1 on
  // wherever it is a line or an upward parabola with its vertex below 1.
  int64_t lo = 1, hi = 2;
  while (PredictPeak(d, static_cast<double>(hi)) <= b) {
    lo = hi;
    if (hi > (int64_t{1} << 40)) return hi;  // no model's batch is larger
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (PredictPeak(d, static_cast<double>(mid)) <= b ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace memtl
