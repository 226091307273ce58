// Tensor objects, in op arguments and in python calls' parameters.
#include "core/read/memtl/record_builder.h"

#include <algorithm>

#include "core/read/common/shape_name.h"

namespace memtl::read {

uint32_t Builder::ParseTensor(JsonCursor& c, bool allow_partial) {
  if (c.Peek() != JsonCursor::Kind::kObject) Fail("expected a tensor object");
  c.BeginObject();
  std::string_view key;
  if (!c.NextKey(&key)) Fail(allow_partial ? "missing field \"ptr\"" : "tensor without \"impl\"");
  return TensorBody(c, key, allow_partial);
}

// The rest of a tensor object whose first key is `key` (its value next).
uint32_t Builder::TensorBody(JsonCursor& c, std::string_view key, bool allow_partial) {
  Tensor t;
  if (chunk_ != nullptr) t.device = kNoTensorDevice;
  uint32_t element_size = 0;
  Layout layout = Layout::kStrided;
  ProducerIds ids;
  bool has_impl = false, has_ptr = false, has_dev = false, has_dtype = false;
  uint64_t impl = 0, ptr = 0;
  sizes_.clear();
  strides_.clear();
  do {
    if (Is(key, "impl")) {
      if (impl != 0) {
        // A repeated "impl": the earlier address is numbered now, in its
        // turn, as each parsed address always has been. Rare enough that a
        // block parsed on its own leaves it to the reading in file order.
        if (chunk_ != nullptr) Fail("a repeated \"impl\"");
        NumberPendingImpl();
        impls_.Number(impl);
      }
      impl = Uint64(c, "impl");
      if (impl != 0 && chunk_ == nullptr) impls_.PrefetchSlot(impl);
      has_impl = true;
    } else if (Is(key, "ptr")) {
      ptr = Uint64(c, "ptr");
      has_ptr = true;
    } else if (Is(key, "id")) {
      const int64_t id = OptInt(c, "id", -1);
      if (id < -1) Fail("negative tensor id");
      ids.id = TensorId(id);
    } else if (Is(key, "aid")) {
      const int64_t aid = OptInt(c, "aid", -1);
      if (aid < -1) Fail("negative allocation id");
      ids.allocation = AllocationId(aid);
    } else if (Is(key, "dev")) {
      t.device = Device(c, "dev");
      has_dev = true;
    } else if (Is(key, "dtype")) {
      // Most tensors have the dtype of the one before.
      const std::string_view dtype = String(c, "dtype");
      if (dtype != last_dtype_) {
        last_dtype_.assign(dtype);
        last_element_size_ = static_cast<uint8_t>(ElementSize(dtype));
      }
      element_size = last_element_size_;
      has_dtype = true;
    } else if (Is(key, "layout")) {
      if (c.Peek() != JsonCursor::Kind::kString || !ParseLayout(c.ReadString(&scratch_), &layout)) {
        layout = Layout::kOther;
      }
    } else if (Is(key, "sizes")) {
      Dims(c, "sizes", &sizes_);
    } else if (Is(key, "strides")) {
      Dims(c, "strides", &strides_);
    } else {
      c.SkipValue();
    }
  } while (c.NextKey(&key));
  if (!has_impl) {
    if (!allow_partial) Fail("tensor without \"impl\"");
    Require(has_ptr, "ptr");
    t.partial = true;
  } else {
    Require(has_ptr, "ptr");
    Require(has_dev, "dev");
    Require(has_dtype, "dtype");
    if (layout == Layout::kStrided && TensorTooLarge(element_size)) {
      Fail(
          "tensor of more than 2^46-1 bytes (its \"sizes\", \"strides\" and dtype; the "
          "size map's limit)");
    }
    t.set_bytes(layout != Layout::kStrided
                    ? kUnsized
                    : SizeOfObservation(sizes_.data(), sizes_.size(), strides_.data(),
                                        strides_.size(), element_size));
  }
  if (t_->tensors.size() >= kMaxTensors) Fail("more than 2^31 tensor observations");
  NumberPendingImpl();
  t_->tensors.push_back(t);
  t_->tensor_ptrs.push_back(ptr);
  if (t_->header.has_ids) t_->tensor_ids.push_back(ids);
  if (keep_shapes_) t_->tensor_shapes.push_back(t.partial ? kNone32 : InternShape());
  const auto index = static_cast<uint32_t>(t_->tensors.size() - 1);
  if (chunk_ != nullptr) {
    chunk_->impls.push_back(impl);  // numbered by the merge, in this order
  } else if (impl != 0) {
    impls_.PrefetchKey(impl);
    pending_tensor_ = index;
    pending_impl_ = impl;
  }
  return index;
}

uint32_t Builder::InternShape() {
  ShapeName(shape_scratch_, sizes_.data(), sizes_.size(), last_dtype_);
  return t_->shapes.Intern(shape_scratch_);
}

// Whether the tensor just read (sizes_, strides_) is larger than
// kMaxTensorBytes, which SizeOfObservation would clamp it to (dimensions
// are below 2^48: Dims checks).
bool Builder::TensorTooLarge(uint32_t element_size) const {
  return PastMaxTensorBytes(sizes_.data(), sizes_.size(), strides_.data(), strides_.size(),
                            element_size);
}

void Builder::Dims(JsonCursor& c, const char* key, std::vector<int64_t>* out) {
  if (c.Peek() == JsonCursor::Kind::kNull) {
    c.ReadNull();
    return;
  }
  if (c.Peek() != JsonCursor::Kind::kArray)
    Fail(std::string("expected a list for \"") + key + "\"");
  c.BeginArray();
  while (c.NextItem()) {
    const int64_t v = Int(c, key);
    if (v < 0 && std::string_view(key) == "sizes") Fail("negative tensor size in \"sizes\"");
    if (v > (int64_t{1} << 48) || v < -(int64_t{1} << 48))
      Fail(std::string("\"") + key + "\" is out of range");
    if (out->size() >= kMaxDims) Fail(std::string("too many dimensions in \"") + key + "\"");
    out->push_back(v);
  }
}

}  // namespace memtl::read
