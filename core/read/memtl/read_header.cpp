// The header line, and what the builder does between and after records.
#include "core/read/memtl/record_builder.h"

#include "core/read/memtl/trace_reader.h"

#include <algorithm>
#include <new>
#include <stdexcept>

namespace memtl::read {

// Device strings as PyTorch parses them (c10::Device): "type" or
// "type:index", with a type PyTorch knows.
bool ValidDeviceName(std::string_view s) {
  static constexpr std::string_view kTypes[] = {
      "cpu",  "cuda", "mkldnn", "opengl", "opencl",        "ideep",  "hip",   "ve",
      "fpga", "maia", "ort",    "xla",    "lazy",          "vulkan", "metal", "xpu",
      "mps",  "meta", "hpu",    "mtia",   "privateuseone", "ipu"};
  const auto colon = s.find(':');
  const auto type = s.substr(0, colon);
  bool known = false;
  for (auto t : kTypes) known |= t == type;
  if (!known) return false;
  if (colon == std::string_view::npos) return true;
  const auto idx = s.substr(colon + 1);
  if (idx.empty() || idx.size() > 3 || (idx.size() > 1 && idx[0] == '0')) return false;
  for (char c : idx) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace memtl::read

namespace memtl {

bool IsDeviceName(std::string_view name) { return read::ValidDeviceName(name); }

Status CheckDeviceOption(std::string_view device) {
  if (device.empty() || IsDeviceName(device)) return {};
  return Status::Error("--device " + Quote(device) +
                       " is not a device (PyTorch accepts \"type\" or \"type:index\" with a "
                       "known type such as cpu or cuda)");
}

}  // namespace memtl

namespace memtl::read {

// Keeps each event array reserved for `factor` times what it holds now
// (the whole file, at the rate read so far), so that a large trace's
// arrays are not regrown near the end: a regrowth copies the array into
// fresh memory twice its size, and at the end of a read that copy is the
// read's memory peak. An array whose projection comes within 2% of its
// capacity is reserved again with a 10% margin: early in the file, when
// copies are small and the rates still move; later only if the file's
// mix of records changes. Untouched reserved memory costs address
// space, not resident memory.
//
// The size is a guess (a gzip trailer's ISIZE can be anything), so a
// reservation that fails is skipped: the arrays then grow as they fill,
// and only memory the trace really needs can run out.
void Builder::ReserveFor(double factor) {
  auto grow = [factor](auto& v) {
    const double need = static_cast<double>(v.size()) * factor;
    if (need * 1.02 <= static_cast<double>(v.capacity())) return;
    try {
      v.reserve(static_cast<size_t>(std::min(need * 1.10 + 256, 1e15)));
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
  };
  grow(t_->events);
  grow(t_->event_t0);
  grow(t_->ops);
  grow(t_->allocs);
  grow(t_->alloc_ptrs);
  grow(t_->py_names);
  grow(t_->other_names);
  grow(t_->arg_kinds);
  grow(t_->arg_refs);
  grow(t_->list_items);
  grow(t_->tensors);
  grow(t_->tensor_ptrs);
  if (keep_shapes_) grow(t_->tensor_shapes);
  if (t_->header.has_ids) {
    grow(t_->tensor_ids);
    grow(t_->alloc_ids);
  }
}

void Builder::Header(JsonCursor& c) {
  if (NextKind(c) != JsonCursor::Kind::kObject) {
    c.SkipValue();  // a syntax error is reported as such
    c.ExpectEnd();
    FailNotATrace("the first line must be the header object");
  }
  c.BeginObject();
  std::string_view key;
  bool format_ok = false;
  int64_t version = 0;
  bool has_version = false;
  while (c.NextKey(&key)) {
    if (Is(key, "format")) {
      format_ok = c.Peek() == JsonCursor::Kind::kString && c.ReadString(&scratch_) == "memtl-trace";
      if (!format_ok)
        FailNotATrace("not a memtl trace (the header's \"format\" must be \"memtl-trace\")");
    } else if (Is(key, "version")) {
      version = Int(c, "version");
      has_version = true;
    } else if (Is(key, "producer") && c.Peek() == JsonCursor::Kind::kString) {
      t_->header.producer = std::string(c.ReadString(&scratch_));
    } else if (Is(key, "torch_version") && c.Peek() == JsonCursor::Kind::kString) {
      t_->header.torch_version = std::string(c.ReadString(&scratch_));
    } else if (Is(key, "ids")) {
      t_->header.has_ids = Bool(c, "ids");
    } else if (Is(key, "profile_memory")) {
      t_->header.profile_memory = Bool(c, "profile_memory") ? 1 : 0;
    } else if (Is(key, "rank") || Is(key, "world_size")) {
      const bool rank = Is(key, "rank");
      const int64_t v = Int(c, rank ? "rank" : "world_size");
      if (v < 0 || v > (int64_t{1} << 31))
        Fail(std::string(rank ? "\"rank\"" : "\"world_size\"") + " is out of range");
      (rank ? t_->header.rank : t_->header.world_size) = v;
    } else if (Is(key, "run") && c.Peek() == JsonCursor::Kind::kString) {
      t_->header.run = std::string(c.ReadString(&scratch_));
    } else if (Is(key, "script") && c.Peek() == JsonCursor::Kind::kString) {
      t_->header.script = std::string(c.ReadString(&scratch_));
    } else if (Is(key, "recorded_at") && c.Peek() == JsonCursor::Kind::kString) {
      t_->header.recorded_at = std::string(c.ReadString(&scratch_));
    } else if (Is(key, "model")) {
      Model(c);
    } else {
      c.SkipValue();
    }
  }
  if (!format_ok)
    FailNotATrace("not a memtl trace (the header's \"format\" must be \"memtl-trace\")");
  if (!has_version) Fail("missing field \"version\"");
  if (version < 1) Fail("invalid format version " + std::to_string(version));
  if (version > kTraceFormatVersion) {
    Fail("format version " + std::to_string(version) + " is newer than this memtl reads (" +
         std::to_string(kTraceFormatVersion) + ")");
  }
  t_->header.version = static_cast<int>(version);
}

// "model": [{"name": "layer1.0.conv1.weight", "ptr": 94..., "dev": "cpu"}, ...].
void Builder::Model(JsonCursor& c) {
  if (NextKind(c) != JsonCursor::Kind::kArray) Fail("expected a list for \"model\"");
  c.BeginArray();
  while (c.NextItem()) {
    if (NextKind(c) != JsonCursor::Kind::kObject) Fail("expected a parameter object in \"model\"");
    TraceHeader::ModelParam p;
    bool has_name = false, has_ptr = false;
    c.BeginObject();
    std::string_view key;
    while (c.NextKey(&key)) {
      if (Is(key, "name")) {
        p.name = std::string(String(c, "name"));
        has_name = true;
      } else if (Is(key, "ptr")) {
        p.ptr = Uint64(c, "ptr");
        has_ptr = true;
      } else if (Is(key, "dev")) {
        p.device = std::string(String(c, "dev"));
      } else {
        c.SkipValue();
      }
    }
    Require(has_name, "name");
    Require(has_ptr, "ptr");
    t_->header.model.push_back(std::move(p));
  }
}

void Builder::FinishImpls() {
  NumberPendingImpl();
  t_->num_impls = static_cast<uint32_t>(impls_.size());
}

}  // namespace memtl::read
