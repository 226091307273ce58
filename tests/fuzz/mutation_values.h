// What the structure-aware mutator (structured_mutator.cpp) puts into a
// trace: numbers at every limit the reader checks, names, devices, dtypes,
// record kinds, scopes and schemas (some that fail to parse, some deeply
// nested), and the keys whose values refer across records.
#pragma once

namespace memtl_fuzz {

// clang-format off
// Integers at and around every limit the reader, the time conversion, the
// sizes, the versions and the sums check (all within 64 bits, so the
// record still reads)...
inline constexpr const char* kExtremes[] = {
    "0", "1", "-1", "2", "7", "999", "1000", "-999", "-1000", "4096",
    "2147483647", "2147483648", "-2147483648", "4294967295", "4294967296",
    "16777216", "1073741824", "268435455", "268435456",
    "70368744177663", "70368744177664", "140737488355327", "140737488355328",
    "-140737488355327", "-140737488355328", "9007199254740993",
    "9223372036854775807", "-9223372036854775808", "-9223372036854775807",
    "9223372036854774807", "-9223372036854774808"};
// ...and numbers no 64-bit integer holds, or that are no JSON at all.
inline constexpr const char* kBadNumbers[] = {
    "9223372036854775808", "-9223372036854775809", "18446744073709551615",
    "18446744073709551616", "-18446744073709551616", "99999999999999999999999",
    "-0", "1e3", "1E400", "-1e400", "1.5", "0.5", "1.0", "-0.0", "00", "01", "-",
    "NaN", "Infinity", "-Infinity", "nan", "0x10", "1_000", "+1", ".5"};

inline constexpr const char* kOpNames[] = {
    "aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::empty",
    "aten::empty_strided", "aten::zeros", "aten::zero_", "aten::copy_", "aten::relu_",
    "aten::relu", "aten::linear", "aten::addmm", "aten::mm", "aten::t", "aten::view",
    "aten::detach", "aten::to", "aten::ones_like", "aten::sum", "aten::add_.Tensor",
    "aten::cat", "aten::split", "aten::_foreach_add_", "aten::lerp_", "[memory]",
    "MulBackward0", "AddmmBackward0", "AccumulateGrad",
    "autograd::engine::evaluate_function: MulBackward0",
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
    "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad", "ProfilerStep#1",
    "nn.Module: Linear_0", "nn.Module: Sequential_0",
    "torch/optim/optimizer.py(117): _optimizer_step_code", "", "x", "a\nb\x1b[2J"};

inline constexpr const char* kDevices[] = {
    "cpu", "cuda:0", "cuda", "cuda:1", "cpu:0", "meta", "mps", "xla:0", "tpu:0",
    "cuda:-1", "cuda:", ":0", "CUDA:0", "cuda:00", "cuda:99999999999999999999",
    "cuda:1a", "", "cpu\n"};

inline constexpr const char* kDtypes[] = {
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
    "bool", "complex64", "complex128", "float8_e4m3fn", "qint8", "unknown", ""};

inline constexpr const char* kKinds[] = {"op", "alloc", "py", "other", "schema", "OP", "", "memtl-trace"};

inline constexpr const char* kScopes[] = {
    "function", "backward_function", "user_scope", "torchscript_function",
    "kernel_function_dtype", "custom_class", "build_feature", "lite_interpreter",
    "static_runtime_op", "static_runtime_model", "global", ""};

inline constexpr const char* kSchemas[] = {
    "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
    "aten::zero_(Tensor(a!) self) -> Tensor(a!)",
    "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    ("aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"),
    "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
    "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
    "aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()",
    "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
    "aten::relu(Tensor self -> Tensor",
    "aten::relu(Tensor self) -> Tensor",
    "x(Tensor(a!) self) -> Tensor(b!)",
    "aten::f(Tensor?[][]?[] x, ((Tensor, int), Tensor[]) y) -> Tensor",
    "aten::f(List(List(Optional(Tensor))) x) -> Tensor"};

inline constexpr const char* kTimeKeys[] = {"t", "t0", "t1"};
// Keys whose values refer to one another across records: a value copied
// from another record of the same key makes shared tensors, reused
// pointers, equal times, parents.
inline constexpr const char* kRefKeys[] = {
    "ptr", "impl", "id", "aid", "t", "t0", "t1", "self", "bytes", "seq", "tid"};
// Numbers that give the tree its shape: changed by MutateShape and
// MutateParent, which keep it valid more often than a random number does.
inline constexpr const char* kShapeKeys[] = {"i", "p", "version"};
// clang-format on

}  // namespace memtl_fuzz
