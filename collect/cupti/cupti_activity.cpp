// CUPTI activity records into Activity (cupti_activity.h).
#include "collect/cupti/cupti_activity.h"

#include <cupti.h>

#include <algorithm>
#include <string>

namespace memtl_cupti {

namespace {

// Host memory (pinned, pageable) counts on the host, the rest on its
// device: managed memory where CUDA placed it first.
bool IsHost(CUpti_ActivityMemoryKind kind) {
  return kind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED || kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
}

std::string_view CopyName(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

void Memory4(const CUpti_ActivityMemory4& r, Activity& out) {
  if (r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
      r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
    return;
  if (r.bytes == 0 || r.bytes > (uint64_t{1} << 47) - 1) return;  // the format's bound
  Memory m;
  m.time = r.timestamp;
  m.address = r.address;
  m.bytes = r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                ? static_cast<int64_t>(r.bytes)
                : -static_cast<int64_t>(r.bytes);
  m.device = r.deviceId;
  m.stream = r.streamId;
  m.host = IsHost(r.memoryKind);
  m.pooled = r.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  out.memory.push_back(m);
}

void Marker2(const CUpti_ActivityMarker2& r, Activity& out) {
  const uint64_t thread = r.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? r.objectId.pt.threadId : 0;
  if ((r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    Span s;
    s.start = s.end = r.timestamp;
    s.name = out.Name(r.name != nullptr ? r.name : "(unnamed range)");
    s.thread = thread;
    out.open[r.id] = s;
  } else if ((r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    const auto it = out.open.find(r.id);
    if (it == out.open.end()) return;  // its start came before collection began
    Span s = it->second;
    s.end = std::max(r.timestamp, s.start);
    out.ranges.push_back(s);
    out.open.erase(it);
  }
}

}  // namespace

uint32_t Activity::Name(std::string_view name) {
  const auto [it, added] = name_ids.try_emplace(std::string(name), names.size());
  if (added) names.emplace_back(name);
  return it->second;
}

size_t DecodeBuffer(uint8_t* buffer, size_t valid, Activity& out) {
  size_t n = 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    ++n;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_MEMORY2:
        Memory4(*reinterpret_cast<const CUpti_ActivityMemory4*>(record), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
        const auto& r = *reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record);
        const bool gone =
            r.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
        out.pools.push_back({r.timestamp, r.address, gone ? 0 : r.size, r.deviceId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto& r = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        out.kernels.push_back({r.start, std::max(r.end, r.start),
                               out.Name(r.name != nullptr ? r.name : "(kernel)"), r.deviceId, 0});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& r = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        out.copies.push_back(
            {r.start, std::max(r.end, r.start), out.Name(CopyName(r.copyKind)), r.deviceId, 0});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER:
        Marker2(*reinterpret_cast<const CUpti_ActivityMarker2*>(record), out);
        break;
      default:
        ++out.other_records;
        break;
    }
  }
  return n;
}

}  // namespace memtl_cupti
