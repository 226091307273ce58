// One element of a Kineto trace's "traceEvents", parsed with JsonCursor into
// the compact record memtl keeps of it (or nothing: GPU kernels, flows,
// metadata and the like are skipped). Numbers are read exactly: "ts" and
// "dur" are microseconds with up to three decimals, turned into integer
// nanoseconds from their text, not through a double.
//
// Defects of one element (NaN or a string where a number belongs, a
// memory event without "Bytes") are counted diagnostics; the element is
// then dropped, or only its bad field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model/diagnostics.h"
#include "core/model/trace.h"

namespace memtl::read {

enum class KinetoKind : uint8_t { kOp, kAnnotation, kPython, kMemory };

// 32 bytes per kept event (a trace of millions of events holds them all
// until the Trace is built from them).
struct KinetoEvent {
  int64_t ts = 0;       // ns, as written (the trace's base time not added)
  int64_t dur = -1;     // ns; -1 for a memory event
  uint32_t thread = 0;  // dense index of (pid, tid)
  uint32_t ref = 0;     // name (string id) or, for a memory event, its index in `memory`
  KinetoKind kind = KinetoKind::kOp;
  // Where an op's or annotation's "Record function id" (the execution
  // trace's rf_id, a 64-bit value) is in KinetoParser::rf_ids, read only
  // when KinetoParser::want_rf_ids; 0: none. An index keeps the event at
  // 32 bytes for the traces that join nothing.
  uint32_t rf = 0;
};
static_assert(sizeof(KinetoEvent) == 32);

struct KinetoMemory {
  int64_t bytes = 0;
  uint64_t addr = 0;
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;
  DeviceIndex device = 0;
  bool has_addr = false;
  bool has_total = false;
  bool has_reserved = false;
};

class KinetoParser {
 public:
  KinetoParser(Trace* trace, Diagnostics* diag) : t_(trace), diag_(diag) {}

  // Parses element `index` (from 1), which starts on `line`: both name it
  // in a diagnostic's example.
  void Element(std::string_view text, uint64_t index, size_t line);
  // A top-level member: the few that matter (baseTimeNanoseconds,
  // profile_memory, schemaVersion) are kept.
  void Member(std::string_view key, std::string_view value);

  std::vector<KinetoEvent> events;
  std::vector<KinetoMemory> memory;
  int64_t base_ns = 0;
  int profile_memory = -1;
  int64_t schema_version = -1;
  int64_t rank = -1, world_size = -1;  // "distributedInfo", when the trace has it
  uint64_t out_of_memory = 0;          // "[OutOfMemory]" events
  bool want_rf_ids = false;            // read ops' "Record function id" (KinetoEvent::rf)
  // The record function ids that KinetoEvent::rf indexes; [0] stands for none.
  std::vector<uint64_t> rf_ids;
  // Per autograd AccumulateGrad op (one per leaf tensor, a parameter, in each
  // backward pass): its index in `events` and the bytes of its first input
  // (the gradient, as large as its leaf) from "Input Dims" and "Input type";
  // ops whose size is not said are left out.
  struct Leaf {
    uint32_t event = 0;
    int64_t bytes = 0;
  };
  std::vector<Leaf> leaves;

 private:
  struct Fields;      // an element's fields that memtl reads
  struct MemoryArgs;  // a [memory] event's arguments
  bool ParseElement(std::string_view text);
  // The element's fields; false when it is no object (counted).
  bool ReadFields(std::string_view text, Fields& f);
  // The kind of record kept of an element; false when none is (an
  // out-of-memory event is counted).
  bool KindOf(const Fields& f, KinetoKind* kind);
  // Keep an op, annotation or python call (AddSpan) or a [memory] event
  // (AddMemory) whose time and thread `e` holds; false when a defect
  // drops it (counted).
  bool AddSpan(const Fields& f, KinetoEvent e);
  bool AddMemory(std::string_view args, KinetoEvent e);
  // False when `args` is no object (counted).
  bool ReadMemoryArgs(std::string_view args, MemoryArgs& a);
  void MemoryArg(std::string_view key, std::string_view raw, MemoryArgs& a);
  static uint64_t RecordFunctionId(std::string_view args);
  // The bytes of an op's first input from its "Input Dims" and "Input
  // type"; 0 when they are missing or name no known dtype.
  static int64_t FirstInputBytes(std::string_view args);
  std::string Where() const;
  uint32_t Thread(std::string_view pid, std::string_view tid);

  Trace* t_;
  Diagnostics* diag_;
  std::unordered_map<std::string, uint32_t> threads_;
  std::string thread_key_, last_thread_key_;
  uint32_t last_thread_ = 0;
  uint64_t index_ = 0;
  size_t line_ = 0;
  std::string scratch_, sanitized_;
};

}  // namespace memtl::read
