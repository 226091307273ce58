// The collected activity as a memtl trace (cupti_trace.h).
#include "collect/cupti/cupti_trace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "collect/common/json_text.h"

namespace memtl_cupti {

namespace {

using memtl_collect::AppendJsonString;

enum class Kind : uint8_t { kRange, kKernel, kCopy, kMemory, kPool };

struct Item {
  uint64_t start = 0, end = 0;
  Kind kind = Kind::kRange;
  uint32_t index = 0;
};

// The devices the trace names: "cpu" for host memory, then cuda:N in order.
struct Devices {
  std::vector<std::string> names;
  std::map<uint32_t, size_t> of_cuda;
  size_t cpu = 0;
};

Devices DevicesOf(const Activity& a) {
  bool host = false;
  std::map<uint32_t, size_t> cuda;
  for (const Memory& m : a.memory) {
    if (m.host) {
      host = true;
    } else {
      cuda[m.device] = 0;
    }
  }
  for (const Pool& p : a.pools) cuda[p.device] = 0;
  Devices d;
  if (host) d.names.emplace_back("cpu");
  for (auto& [device, index] : cuda) {
    index = d.names.size();
    d.names.push_back("cuda:" + std::to_string(device));
  }
  d.of_cuda = std::move(cuda);
  return d;
}

// Everything in start order, ranges first at one time and the longer
// first, so that a range comes before what it holds.
std::vector<Item> ItemsInOrder(const Activity& a) {
  std::vector<Item> items;
  items.reserve(a.ranges.size() + a.kernels.size() + a.copies.size() + a.memory.size() +
                a.pools.size());
  for (uint32_t i = 0; i < a.ranges.size(); ++i)
    items.push_back({a.ranges[i].start, a.ranges[i].end, Kind::kRange, i});
  for (uint32_t i = 0; i < a.kernels.size(); ++i)
    items.push_back({a.kernels[i].start, a.kernels[i].end, Kind::kKernel, i});
  for (uint32_t i = 0; i < a.copies.size(); ++i)
    items.push_back({a.copies[i].start, a.copies[i].end, Kind::kCopy, i});
  for (uint32_t i = 0; i < a.memory.size(); ++i)
    items.push_back({a.memory[i].time, a.memory[i].time, Kind::kMemory, i});
  for (uint32_t i = 0; i < a.pools.size(); ++i)
    items.push_back({a.pools[i].time, a.pools[i].time, Kind::kPool, i});
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    if (x.start != y.start) return x.start < y.start;
    if ((x.kind == Kind::kRange) != (y.kind == Kind::kRange)) return x.kind == Kind::kRange;
    return x.end > y.end;
  });
  return items;
}

class Writer {
 public:
  Writer(const Activity& a, const std::function<void(std::string_view)>& write)
      : a_(a), write_(write), devices_(DevicesOf(a)) {
    allocated_.assign(devices_.names.size(), 0);
    direct_.assign(devices_.names.size(), 0);
    pooled_.assign(devices_.names.size(), 0);
  }

  void Header(std::string_view producer) {
    s_ += R"({"format":"memtl-trace","version":1,"producer":)";
    AppendJsonString(&s_, producer);
    s_ += R"(,"ids":false,"devices":[)";
    for (size_t d = 0; d < devices_.names.size(); ++d) {
      if (d > 0) s_ += ',';
      AppendJsonString(&s_, devices_.names[d]);
    }
    s_ += R"(],"record_shapes":false,"profile_memory":true,"with_stack":false})";
    s_ += '\n';
  }

  void Records() {
    struct Open {
      uint64_t end;
      int64_t index;
    };
    std::vector<Open> stack;
    for (const Item& item : ItemsInOrder(a_)) {
      while (!stack.empty() && (stack.back().end < item.start ||
                                (item.kind == Kind::kRange && item.end > stack.back().end)))
        stack.pop_back();
      const int64_t parent = stack.empty() ? -1 : stack.back().index;
      switch (item.kind) {
        case Kind::kRange:
          Range(a_.ranges[item.index], parent);
          stack.push_back({item.end, next_ - 1});
          break;
        case Kind::kKernel:
          Other(a_.kernels[item.index], parent, "cuda_kernel");
          break;
        case Kind::kCopy:
          Other(a_.copies[item.index], parent, "cuda_memcpy");
          break;
        case Kind::kMemory:
          Alloc(a_.memory[item.index], parent);
          break;
        case Kind::kPool:
          PoolChange(a_.pools[item.index]);
          break;
      }
      if (s_.size() >= kFlushBytes) Flush();
    }
    Flush();
  }

  void Flush() {
    if (!s_.empty()) write_(s_);
    s_.clear();
  }

 private:
  static constexpr size_t kFlushBytes = size_t{64} * 1024;

  void Start(const char* kind, int64_t parent) {
    s_ += R"({"k":")";
    s_ += kind;
    s_ += R"(","i":)" + std::to_string(next_++) + R"(,"p":)" + std::to_string(parent);
  }

  void Range(const Span& r, int64_t parent) {
    Start("op", parent);
    s_ += R"(,"name":)";
    AppendJsonString(&s_, a_.names[r.name]);
    s_ += R"(,"t0":)" + std::to_string(r.start) + R"(,"t1":)" + std::to_string(r.end) +
          R"(,"tid":)" + std::to_string(r.thread) + R"(,"scope":"user_scope","seq":-1,"args":[]})";
    s_ += '\n';
  }

  void Other(const Span& k, int64_t parent, const char* type) {
    Start("other", parent);
    s_ += R"(,"name":)";
    AppendJsonString(&s_, a_.names[k.name]);
    s_ += R"(,"t0":)" + std::to_string(k.start) + R"(,"t1":)" + std::to_string(k.end) +
          R"(,"type":")" + type + R"("})";
    s_ += '\n';
  }

  size_t DeviceOf(const Memory& m) const {
    return m.host ? devices_.cpu : devices_.of_cuda.at(m.device);
  }

  void Alloc(const Memory& m, int64_t parent) {
    const size_t d = DeviceOf(m);
    allocated_[d] += m.bytes;
    if (!m.pooled) direct_[d] += m.bytes;
    Start("alloc", parent);
    s_ += R"(,"t":)" + std::to_string(m.time) + R"(,"tid":0,"ptr":)" + std::to_string(m.address) +
          R"(,"bytes":)" + std::to_string(m.bytes) + R"(,"dev":)";
    AppendJsonString(&s_, devices_.names[d]);
    s_ += R"(,"total_allocated":)" + std::to_string(allocated_[d]) + R"(,"total_reserved":)" +
          std::to_string(direct_[d] + pooled_[d]) + R"(,"id":null,"aid":null})";
    s_ += '\n';
  }

  void PoolChange(const Pool& p) {
    const size_t d = devices_.of_cuda.at(p.device);
    int64_t& size = pool_size_[p.address];
    pooled_[d] += static_cast<int64_t>(p.size) - size;
    size = static_cast<int64_t>(p.size);
  }

  const Activity& a_;
  const std::function<void(std::string_view)>& write_;
  Devices devices_;
  std::vector<int64_t> allocated_, direct_, pooled_;
  std::map<uint64_t, int64_t> pool_size_;
  std::string s_;
  int64_t next_ = 0;
};

}  // namespace

void WriteTrace(const Activity& a, std::string_view producer,
                const std::function<void(std::string_view)>& write) {
  Writer w(a, write);
  w.Header(producer);
  w.Records();
}

}  // namespace memtl_cupti
