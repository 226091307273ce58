// The report's "What would help" (help.h).
#include "core/plan/help.h"

#include <algorithm>
#include <map>

#include "core/plan/whatif.h"

namespace memtl {

namespace {

constexpr int kRanks = 8;

// "Block_3" -> "Block": a python tracer's module name without its call
// number.
std::string ClassOf(std::string_view name) {
  const size_t us = name.rfind('_');
  if (us == std::string_view::npos || us + 1 == name.size()) return std::string(name);
  for (size_t i = us + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::string(name);
  }
  return std::string(name.substr(0, us));
}

// The repeated blocks: per depth, the classes with at least two
// differently numbered calls under one parent path, from the shallowest
// two depths that have one (ResNet's layers and their BasicBlocks; a
// transformer's layers), at most `n`.
std::vector<std::string> RepeatedBlocks(const Trace& trace, size_t n) {
  constexpr std::string_view kPrefix = "nn.Module: ";
  // depth -> class -> (parent path -> names)
  std::map<size_t, std::map<std::string, std::map<std::string, std::vector<std::string>>>> seen;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Event& ev = trace.events[e];
    if (ev.kind != EventKind::kPy) continue;
    const std::string& name = trace.Name(ev);
    if (!name.starts_with(kPrefix)) continue;
    const std::string path = ModulePath(trace, e);
    const size_t cut = path.rfind(" > ");
    const std::string parent = cut == std::string::npos ? "" : path.substr(0, cut);
    const size_t depth = static_cast<size_t>(std::count(path.begin(), path.end(), '>'));
    const std::string own = name.substr(kPrefix.size());
    auto& names = seen[depth][ClassOf(own)][parent];
    if (std::find(names.begin(), names.end(), own) == names.end()) names.push_back(own);
  }
  std::vector<std::string> found;
  size_t depths = 0;
  for (const auto& [depth, classes] : seen) {
    const size_t before = found.size();
    for (const auto& [cls, parents] : classes) {
      const bool repeated = std::any_of(parents.begin(), parents.end(),
                                        [](const auto& p) { return p.second.size() >= 2; });
      if (repeated && found.size() < n) found.push_back(cls + "_*");
    }
    if (found.size() > before && ++depths == 2) break;
  }
  return found;
}

struct Candidate {
  std::string change;
  std::string flags;
  WhatIfChanges changes;
  std::string trust;
};

std::vector<Candidate> Candidates(const Trace& trace) {
  std::vector<Candidate> out;
  const std::string r = std::to_string(kRanks);
  {
    Candidate c{"gradients set to none at zero_grad",
                "--set-to-none",
                {},
                "checked against real runs, an MLP and a transformer (within 0.1%)"};
    c.changes.set_to_none = true;
    out.push_back(c);
  }
  const std::vector<std::string> blocks = RepeatedBlocks(trace, 2);
  for (const std::string& b : blocks) {
    Candidate c{"checkpoint each " + b.substr(0, b.size() - 2),
                "--checkpoint '" + b + "'",
                {},
                "checked against torch.utils.checkpoint on an MLP and a transformer (within 3%)"};
    c.changes.checkpoint = {b};
    out.push_back(c);
  }
  {
    Candidate c{
        "ZeRO-1 at " + r + " ranks (optimizer state sharded)",
        "--shard optimizer=" + r,
        {},
        "checked against ZeroRedundancyOptimizer at 2 and 4 ranks (within 0.1%); DDP's buckets "
        "stay as measured"};
    c.changes.shard_optimizer = kRanks;
    out.push_back(c);
  }
  {
    Candidate c{"ZeRO-2 at " + r + " ranks (and gradients)",
                "--shard optimizer=" + r + " --shard grads=" + r,
                {},
                "model only: not checked against a real run; the reduce buckets are not counted"};
    c.changes.shard_optimizer = c.changes.shard_grads = kRanks;
    out.push_back(c);
  }
  for (const std::string& b : blocks) {
    std::string flags = "--shard optimizer=";
    flags += r;
    flags += " --shard grads=";
    flags += r;
    flags += " --shard params=";
    flags += r;
    flags += " --wrap '";
    flags += b;
    flags += "'";
    Candidate c{"ZeRO-3 / FSDP at " + r + " ranks, each " + b.substr(0, b.size() - 2) + " a unit",
                flags,
                {},
                "model only: not checked against a real run; the collectives' buffers are not "
                "counted"};
    c.changes.shard_optimizer = c.changes.shard_grads = c.changes.shard_params = kRanks;
    c.changes.wrap = b;
    out.push_back(c);
  }
  {
    Candidate c{"parameters in bf16",
                "--dtype params=bf16",
                {},
                "bytes scaled; a float32 master copy (mixed precision) would add them back"};
    c.changes.dtype_bytes[0] = DtypeBytes("bf16");
    out.push_back(c);
  }
  return out;
}

}  // namespace

void AddWhatWouldHelp(const ExplainInput& in, Report& report) {
  if (in.inferred != nullptr) return;  // the changes edit tensors' lifetimes
  // Only the report's devices: a trace of thousands of devices would replay
  // each one for every candidate.
  std::vector<DeviceIndex> devices;
  for (const DeviceReport& d : report.devices) devices.push_back(d.device);
  const WhatIfReplay replay(in, &devices);
  for (const Candidate& c : Candidates(in.trace)) {
    auto r = replay.Run(c.changes, "", false);
    if (!r.ok()) continue;  // the trace lacks what it changes
    for (const WhatIfDevice& d : r.value().devices) {
      const int64_t saved = d.before.bytes - d.after.bytes;
      if (saved <= 0) continue;
      for (DeviceReport& dr : report.devices) {
        if (dr.name == d.device)
          dr.help.push_back({c.change, c.flags, d.after.bytes, saved, c.trust});
      }
    }
  }
  for (DeviceReport& dr : report.devices) {
    std::stable_sort(dr.help.begin(), dr.help.end(),
                     [](const HelpRow& a, const HelpRow& b) { return a.saved > b.saved; });
  }
}

}  // namespace memtl
