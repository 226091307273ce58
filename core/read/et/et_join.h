// Joins an execution trace (et_reader.h) to the Kineto trace of the same run
// (kineto_reader.h), so that a Kineto trace gets what memtl's own recorder
// records: op arguments with tensor identity, and allocations that belong
// to tensors. Then the whole pipeline runs on it (data flow, the seven
// passes): categories from files, offline.
//
// - Ops: a Kineto op (cpu_op, user_annotation) joins the node with its
//   "Record function id" (the node's rf_id) and its name. The node's inputs
//   become the op's arguments, as PyTorch's profiler records them: tensors,
//   tensor lists, ints, floats, bools, strings; int lists, devices and None
//   are not captured.
// - Tensors: the node's tensor id stands for the TensorImpl address (the
//   execution trace numbers addresses, so ids are reused as addresses are,
//   and identity treats them as it treats torch 1.13's raw addresses); the
//   storage id stands for the data pointer. A storage id is mapped to the
//   address of the [memory] event that allocated it: an allocation made
//   directly inside a joined op and not freed before the op ends is the
//   storage of one of the op's output tensors, the one whose bytes it
//   holds exactly (ties: output order), or, on a device whose allocator
//   rounds sizes up, the first whose bytes it can hold among those an op
//   of the profile creates (a block that no tensor owns, such as the
//   generator state torch.utils.checkpoint saves, stays unmapped rather
//   than take a parameter that merely fits). A storage id is one
//   data pointer for the whole trace (PyTorch never forgets one), so one
//   sighting maps it everywhere, and it can be at an address only if the
//   address is allocated at each of its reads and free where an op creates
//   it (else it stays unmapped). An address has one storage id too: a
//   later block there holds the storage mapped at its first, unless that
//   storage only tied with another for the first block and the other
//   explains the later one (Join::AddressGoesTo). A storage never
//   allocated in the profile (parameters and inputs made before it) gets
//   an address of its own; one seen only in empty tensors is the null data
//   pointer, and so is one seen on a meta tensor or created empty: storage
//   ids are only trusted for tensors with data (Join::FindDataless).
// - The python tracer's module and optimizer records, which neither file
//   holds, are rebuilt from the joined ops where the Kineto trace has the
//   tracer's events (et_join_tracer.cpp); without them the passes that
//   read those records find nothing, as PyTorch's without the tracer.
//   Ops that did not join have no arguments.
//
// The result is the Trace a memtl trace of the run would give
// (docs/trace-format.md), built from the two files directly (no text is
// written and read again), with the coverage of the join in ReadInfo::note
// and a diagnostic for each op or allocation the join left out.
#pragma once

#include "core/model/status.h"
#include "core/read/common/read_options.h"
#include "core/read/kineto/kineto_reader.h"

namespace memtl {

// `kineto` as ReadKinetoInput gives it with options.et_path set (its op
// records' rf ids and end times kept); reads options.et_path.
Expected<KinetoRead> JoinExecutionTrace(KinetoRead kineto, const ReadOptions& options);

// memtl's --et: the Kineto trace `input` (detected as kKineto) read with
// ReadKinetoInput, then joined to options.et_path's execution trace (which
// must not be empty). Memory that runs out in the join is "NAME: out of
// memory", NAME the Kineto trace's, as in its read.
Expected<KinetoRead> ReadKinetoJoinedInput(OpenedInput input, const ReadOptions& options);
// Tests: the Kineto trace held in memory.
Expected<KinetoRead> ReadKinetoJoinedString(std::string data, const std::string& name,
                                            const ReadOptions& options);

// The join's work, for tests: the Trace built from `kineto` and `et`, with
// the coverage note and diagnostics. `keep_shapes`: ReadOptions::keep_shapes.
struct JoinedTrace {
  Trace trace;
  std::string note;
  Diagnostics diagnostics;
  uint64_t ops = 0, joined_ops = 0, allocations = 0, mapped_allocations = 0;
  // Bytes of the Kineto reader's memory from before the profile that are
  // storages of the execution trace (counted as those tensors instead).
  int64_t pre_profile_in_tensors = 0;
};
namespace read {
struct ExecutionTrace;
}
Expected<JoinedTrace> BuildJoinedTrace(const KinetoRead& kineto, const read::ExecutionTrace& et,
                                       const std::string& et_name, bool keep_shapes = false);

}  // namespace memtl
