// The least-squares fits of memtl fit (core/plan/fit.h): exact curves are
// found again, a poor fit is said, the largest scale within a budget, and
// the inputs a fit refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/plan/fit.h"

using namespace memtl;

namespace {

// A run whose peak is `params` of parameters plus `per_unit` bytes of
// activations per unit of scale (and `square` per unit squared).
RunPeak Run(double scale, int64_t params, double per_unit, double square = 0) {
  RunPeak r;
  r.name = "run" + std::to_string(static_cast<int>(scale));
  RunPeak::Device d;
  d.name = "cuda:0";
  d.by_category[0] = params;
  d.by_category[4] = static_cast<int64_t>(per_unit * scale + square * scale * scale);
  d.peak = d.by_category[0] + d.by_category[4];
  r.scale = scale;
  r.devices.push_back(d);
  return r;
}

}  // namespace

TEST_CASE("fit: a line in the batch size is found again, and predicts") {
  const std::vector<RunPeak> runs = {Run(2, 1000, 300), Run(4, 1000, 300), Run(8, 1000, 300)};
  const auto fit = FitPeaks(runs, FitBy::kBatch);
  REQUIRE(fit.ok());
  const DeviceFit& d = fit.value().devices.at(0);
  CHECK(d.peak.c[0] == doctest::Approx(1000));
  CHECK(d.peak.c[1] == doctest::Approx(300));
  CHECK(d.peak.At(32) == doctest::Approx(1000 + 300 * 32));
  CHECK(d.category[0].c[1] == doctest::Approx(0).epsilon(1e-9));  // parameters do not grow
  CHECK_FALSE(d.poor);
  // The largest batch within 10,000 bytes: 1000 + 300 b <= 10000, b = 30.
  CHECK(MaxScaleWithin(d, 10000) == 30);
  CHECK(MaxScaleWithin(d, 1200) == std::nullopt);  // not even batch 1
}

TEST_CASE("fit: the sequence length takes a square term") {
  const std::vector<RunPeak> runs = {Run(64, 5000, 10, 0.5), Run(128, 5000, 10, 0.5),
                                     Run(256, 5000, 10, 0.5), Run(512, 5000, 10, 0.5)};
  const auto fit = FitPeaks(runs, FitBy::kSequence);
  REQUIRE(fit.ok());
  const Curve& c = fit.value().devices.at(0).peak;
  CHECK(c.c[2] == doctest::Approx(0.5));
  CHECK(c.At(1024) == doctest::Approx(5000 + 10 * 1024 + 0.5 * 1024 * 1024));
  // A line fitted through a square's points is poor, and says so.
  const auto line = FitPeaks(runs, FitBy::kBatch);
  REQUIRE(line.ok());
  CHECK(line.value().devices.at(0).poor);
}

TEST_CASE("fit: what it refuses") {
  CHECK_FALSE(FitPeaks({Run(2, 1000, 300)}, FitBy::kBatch).ok());
  CHECK_FALSE(FitPeaks({Run(2, 1000, 300), Run(2, 1000, 300)}, FitBy::kBatch).ok());
  CHECK_FALSE(FitPeaks({Run(2, 1000, 300), Run(4, 1000, 300)}, FitBy::kSequence).ok());
  const auto models = FitPeaks({Run(2, 1000, 300), Run(4, 2000, 300)}, FitBy::kBatch);
  REQUIRE_FALSE(models.ok());
  CHECK(models.status().message().find("different models") != std::string::npos);
  CHECK_FALSE(FitPeaks({Run(0, 1000, 300), Run(4, 1000, 300)}, FitBy::kBatch).ok());
}

TEST_CASE("fit: the peak is the largest phase's, each phase fitted on its own") {
  // The optimizer step holds 1200 bytes whatever the scale; the backward
  // 200 + 100 s: a small run peaks in the step, a large one in the backward.
  std::vector<RunPeak> runs;
  for (const double s : {2.0, 4.0, 8.0}) {
    RunPeak r = Run(s, 1000, 0);
    r.devices[0].phase_peak = {0, static_cast<int64_t>(200 + 100 * s), 1200, 0};
    r.devices[0].peak = std::max<int64_t>(1200, static_cast<int64_t>(200 + 100 * s));
    runs.push_back(r);
  }
  const auto fit = FitPeaks(runs, FitBy::kBatch);
  REQUIRE(fit.ok());
  const DeviceFit& d = fit.value().devices.at(0);
  CHECK(PredictPeak(d, 2) == doctest::Approx(1200));
  CHECK(PredictPeak(d, 32) == doctest::Approx(200 + 100 * 32));
  CHECK_FALSE(d.poor);
  CHECK(MaxScaleWithin(d, 5000) == 48);
}

TEST_CASE("fit: by sequence length, a square the runs do not need is left out") {
  // Three runs a line explains within 1% (a little noise on 5000 + 30 s):
  // a parabola would pass through all three and curve away past them.
  std::vector<RunPeak> runs = {Run(16, 5000, 30), Run(32, 5000, 30), Run(64, 5000, 30)};
  runs[1].devices[0].peak += 40;  // 0.6% of 5960
  const auto fit = FitPeaks(runs, FitBy::kSequence);
  REQUIRE(fit.ok());
  const DeviceFit& d = fit.value().devices.at(0);
  CHECK(d.peak.c[2] == 0);
  CHECK(PredictPeak(d, 512) == doctest::Approx(5000 + 30 * 512).epsilon(0.01));
  // The same runs with a real square (0.5 s^2: 6% of the largest) keep it.
  const std::vector<RunPeak> curved = {Run(16, 5000, 30, 0.5), Run(32, 5000, 30, 0.5),
                                       Run(64, 5000, 30, 0.5)};
  const auto square = FitPeaks(curved, FitBy::kSequence);
  REQUIRE(square.ok());
  CHECK(square.value().devices.at(0).peak.c[2] == doctest::Approx(0.5));
}
