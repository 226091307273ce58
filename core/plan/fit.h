// `memtl fit`: a run's peak memory against its scale (the batch size, or
// the sequence length), fitted over several runs of one model, to answer
// "what is the peak at batch 64?" and "what is the largest batch that fits
// 80 GB?" before the run is made.
//
// Per device, the peak total and each category's bytes at the peak are
// fitted by least squares (Eigen's column-pivoting QR): linear in the batch
// size (activations, gradients of inputs and temporaries grow with it;
// parameters and optimizer state do not), and linear plus quadratic in the
// sequence length (attention scores grow with its square), where the
// square term stands only if the line misses a run by more than 2% (three
// runs always lie on some parabola: fitted to them, a square is no
// evidence of one). A fit is "poor"
// when a measured run lies more than 5% from it, and a prediction is an
// extrapolation when it is asked for past twice the largest measured scale:
// the outputs say both.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/status.h"

namespace memtl {

enum class FitBy : uint8_t { kBatch, kSequence };

// The phases of a step, as context.h names them.
inline constexpr std::array<const char*, 4> kPhases = {"forward", "backward", "optimizer", "other"};

// One run's measurements: its scale and, per device, its peak.
struct RunPeak {
  std::string name;  // the trace, for messages
  double scale = 0;
  struct Device {
    std::string name;
    int64_t peak = 0;                      // bytes, all categories together
    std::array<int64_t, 8> by_category{};  // at the peak, in the export's order
    // The largest total while each phase runs (kPhases order; 0: the
    // phase never runs): the peak moves between phases as the scale grows
    // (a small run peaks in the optimizer step, a large one in the
    // backward pass), so each is fitted on its own.
    std::array<int64_t, 4> phase_peak{};
  };
  std::vector<Device> devices;
};

// peak(s) = c0 + c1 s (+ c2 s^2 by sequence length), in bytes.
struct Curve {
  std::array<double, 3> c{};
  double max_relative_residual = 0;  // over the runs, |measured - fit| / measured
  double At(double s) const { return c[0] + c[1] * s + c[2] * s * s; }
};

struct DeviceFit {
  std::string device;
  // The peak total: the largest of the phases' curves (phase[p] for the
  // phases every run has; the others are empty), each fitted on its own.
  std::array<std::optional<Curve>, 4> phase;
  Curve peak;                     // the peak total fitted as one curve, for its miss
  std::array<Curve, 8> category;  // each category at the peak
  bool poor = false;              // a run lies more than kPoorFit from `peak`
};

inline constexpr double kPoorFit = 0.05;

struct FitReport {
  FitBy by = FitBy::kBatch;
  std::vector<double> scales;  // the runs', in the order given
  double max_scale_measured = 0;
  std::vector<DeviceFit> devices;  // the devices every run has
};

// Fits every device the runs share. Errors: fewer runs than the curve has
// coefficients, or fewer distinct scales; a scale that is not positive;
// runs of different models (their PARAMETER bytes at the peak differ by
// more than 1%: no model's parameters grow with its batch).
Expected<FitReport> FitPeaks(const std::vector<RunPeak>& runs, FitBy by);

// The predicted peak at scale `s`: the largest phase's.
double PredictPeak(const DeviceFit& d, double s);

// The largest scale (an integer, at least 1) whose predicted peak is at
// most `budget` bytes; nullopt when even scale 1 does not fit, or when the
// peak does not grow with the scale (any scale fits: the answer is no
// number).
std::optional<int64_t> MaxScaleWithin(const DeviceFit& d, int64_t budget);

}  // namespace memtl
