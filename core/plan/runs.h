// What `memtl fit` measures of each trace (fit.h): the run's scale, from
// its inputs' shapes or as given, and each device's peak by category; and
// the fit as text and JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/model/status.h"
#include "core/plan/fit.h"

namespace memtl {

// Analyzes the trace at `path` (the whole pipeline, shapes kept) and
// measures it. The scale is `scale` when given, else read from the inputs:
// the largest INPUT tensor's first dimension (the batch) or its second (the
// sequence length); an error says to give --scale when no input has one.
Expected<RunPeak> MeasureRun(const std::string& path, FitBy by, std::optional<double> scale);

// Measures each trace (its scale from `scales`, in order, when not empty:
// one per trace) and fits them (FitPeaks).
Expected<FitReport> FitTraces(const std::vector<std::string>& paths, FitBy by,
                              const std::vector<double>& scales);

// The fit in words, and as JSON: per device the curve, its largest miss,
// the peak predicted at `at` (when given) and the largest scale within
// `budget` bytes (when given).
struct FitQuestion {
  std::optional<double> at;
  std::optional<int64_t> budget;
};
std::string FormatFit(const FitReport& fit, const FitQuestion& q);
std::string FitJson(const FitReport& fit, const FitQuestion& q);

}  // namespace memtl
