// Schema parser, registry and matcher: PyTorch's rules on small cases.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "core/schema/schema.h"

using namespace memtl;

namespace {
FunctionSchema Parse(const char* s) {
  auto r = ParseSchema(s);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.status().message()));
  return r.value();
}
}  // namespace

TEST_CASE("schema: name, overload, keyword-only, defaults and returns") {
  const auto s = Parse("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  CHECK(s.name == "aten::add");
  CHECK(s.overload == "Tensor");
  REQUIRE(s.arguments.size() == 3);
  CHECK(s.arguments[0].name == "self");
  CHECK(s.arguments[0].type.kind == SchemaType::kTensor);
  CHECK_FALSE(s.arguments[1].kwarg_only);
  CHECK(s.arguments[2].kwarg_only);
  CHECK(s.arguments[2].has_default);
  CHECK(s.arguments[2].type.kind == SchemaType::kNumber);
  REQUIRE(s.returns.size() == 1);
  CHECK(s.returns[0].type.kind == SchemaType::kTensor);
}

TEST_CASE("schema: default overload has an empty overload name") {
  const auto s = Parse("aten::ones(SymInt[] size, *, ScalarType? dtype=None) -> Tensor");
  CHECK(s.overload.empty());
  CHECK(s.arguments[0].type.kind == SchemaType::kList);
  CHECK(s.arguments[0].type.elements[0].kind == SchemaType::kInt);  // SymInt's fake type
  CHECK(s.arguments[1].type.kind == SchemaType::kOptional);
  CHECK(s.arguments[1].type.elements[0].kind == SchemaType::kInt);  // ScalarType's fake type
}

TEST_CASE("schema: alias annotations mark writes") {
  const auto s = Parse("aten::sin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)");
  CHECK_FALSE(s.arguments[0].is_write);
  CHECK(s.arguments[1].is_write);
  CHECK(s.arguments[1].alias == "a!");
  CHECK(s.returns[0].is_write);
  const auto v = Parse("aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]");
  CHECK_FALSE(v.arguments[0].is_write);
  CHECK(v.arguments[0].alias == "a -> *");
  CHECK(v.returns[0].type.kind == SchemaType::kList);
}

TEST_CASE("schema: a write annotation on list elements makes the list written") {
  const auto s = Parse(
      "aten::_amp_foreach_non_finite_check_and_unscale_(Tensor(a!)[] self, Tensor(b!) found_inf, "
      "Tensor "
      "inv_scale) -> ()");
  CHECK(s.arguments[0].is_write);
  CHECK(s.arguments[0].type.kind == SchemaType::kList);
  CHECK(s.returns.empty());
  const auto t = Parse("aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)");
  CHECK(t.arguments[0].is_write);
  CHECK_FALSE(t.arguments[1].is_write);
}

TEST_CASE("schema: fixed-size lists, optional lists, tuples, containers") {
  const auto s = Parse(
      "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
      "int[2] dilation=1, "
      "bool ceil_mode=False) -> Tensor");
  CHECK(s.arguments[1].type.fixed_size == 2);
  const auto i = Parse("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
  CHECK(i.arguments[1].type.kind == SchemaType::kList);
  CHECK(i.arguments[1].type.elements[0].kind == SchemaType::kOptional);
  const auto m = Parse(
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  CHECK(m.returns.size() == 2);
  CHECK(m.returns[1].name == "indices");
  const auto d = Parse("aten::update.str(Dict(str, t)(a!) self, Dict(str, t)(a!) to_add) -> ()");
  CHECK(d.arguments[0].is_write);
  CHECK(d.arguments[0].type.kind == SchemaType::kOther);
  const auto str = Parse(
      R"(aten::pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor)");
  CHECK(str.arguments.size() == 4);
  const auto va = Parse("prim::Print(...) -> ()");
  CHECK(va.is_vararg);
}

TEST_CASE("schema: malformed strings are rejected with a message") {
  CHECK_FALSE(ParseSchema("add(Tensor self) -> Tensor").ok());  // no namespace
  CHECK_FALSE(ParseSchema("aten::add(Tensor self").ok());
  CHECK_FALSE(ParseSchema("aten::add(Tensor self) Tensor").ok());
  CHECK_FALSE(ParseSchema("aten::add(Tensor(a! self) -> Tensor").ok());
  CHECK_FALSE(ParseSchema("aten::add(Tensor self) -> Tensor trailing junk").ok());
  auto r = ParseSchema("aten::x(int[ a) -> int");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("aten::x") != std::string::npos);
}

TEST_CASE("schema: every built-in schema parses") {
  auto reg = SchemaRegistry::Builtin();
  const Status all = reg.CheckAll();
  CHECK_MESSAGE(all.ok(), (all.ok() ? "" : all.message()));
  const auto* add = reg.Lookup("aten::add");
  REQUIRE(add != nullptr);
  CHECK(add->size() >= 4);
  CHECK(reg.Lookup("My Annotation") == nullptr);         // no "::": not an operator name
  CHECK(reg.Lookup("Namespaced::Annotation")->empty());  // well formed but unknown
}

TEST_CASE("registry: the embedded table holds every line of builtin_schemas.txt") {
  std::ifstream in(std::string(MEMTL_SOURCE_DIR) + "/core/schema/data/builtin_schemas.txt");
  REQUIRE(in);
  size_t schema_lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#' && line.find('(') != std::string::npos) ++schema_lines;
  }
  CHECK(schema_lines > 4000);
  CHECK(SchemaRegistry::Builtin().builtin_size() == schema_lines);
}

TEST_CASE("registry: a trace's names select the built-in lines kept") {
  StringTable names;
  names.Intern("aten::add_");
  names.Intern("aten::sin");
  names.Intern("record_workloads.py(52): step");  // not an operator: no line
  const auto full = SchemaRegistry::Builtin();
  const auto some = SchemaRegistry::Builtin(names);
  CHECK(some.builtin_size() ==
        full.Lookup("aten::add_")->size() + full.Lookup("aten::sin")->size());
  for (const char* op : {"aten::add_", "aten::sin"}) {
    const auto* a = full.Lookup(op);
    const auto* b = some.Lookup(op);
    REQUIRE(a->size() == b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      CHECK((*a)[i].overload == (*b)[i].overload);
      CHECK((*a)[i].arguments.size() == (*b)[i].arguments.size());
    }
  }
  CHECK(full.Lookup("aten::add")->size() >= 4);
  CHECK(some.Lookup("aten::add")->empty());  // a name the trace does not hold: none kept
}

TEST_CASE("matcher: PyTorch's observed-type rules") {
  SchemaType number{SchemaType::kNumber, "Scalar", -1, {}};
  SchemaType integer{SchemaType::kInt, "int", -1, {}};
  SchemaType flt{SchemaType::kFloat, "float", -1, {}};
  SchemaType tensor{SchemaType::kTensor, "Tensor", -1, {}};
  SchemaType opt_tensor{SchemaType::kOptional, "Optional", -1, {tensor}};
  SchemaType tensor_list{SchemaType::kList, "List", -1, {tensor}};
  SchemaType int_list{SchemaType::kList, "List", -1, {integer}};
  SchemaType device{SchemaType::kOther, "Device", -1, {}};
  CHECK(TypeMatches(Observed::kBool, integer));  // a Python bool is an int
  CHECK_FALSE(TypeMatches(Observed::kInt, flt));
  CHECK(TypeMatches(Observed::kComplex, number));
  CHECK(TypeMatches(Observed::kNone, opt_tensor));
  CHECK_FALSE(TypeMatches(Observed::kNone, tensor));
  CHECK(TypeMatches(Observed::kTensorList, tensor_list));
  CHECK_FALSE(TypeMatches(Observed::kBadTensorList, tensor_list));
  CHECK(TypeMatches(Observed::kNone, int_list));  // int lists are not recorded
  CHECK_FALSE(TypeMatches(Observed::kTensorList, int_list));
  CHECK(TypeMatches(Observed::kNone, device));
  CHECK_FALSE(TypeMatches(Observed::kOther, device));
}

TEST_CASE("matcher: overload resolution and mutability") {
  auto reg = SchemaRegistry::Builtin();
  // add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)
  auto m = MatchSchemas(reg.Lookup("aten::add_"),
                        {Observed::kTensor, Observed::kTensor, Observed::kInt});
  REQUIRE(m.size() == 1);
  CHECK(m[0]->overload == "Tensor");
  CHECK(InputsAreMutable(m, 3) == std::vector<int8_t>{1, 0, 0});
  // sin.out: the out argument is written.
  m = MatchSchemas(reg.Lookup("aten::sin"), {Observed::kTensor, Observed::kTensor});
  REQUIRE(m.size() == 1);
  CHECK(m[0]->overload == "out");
  CHECK(InputsAreMutable(m, 2) == std::vector<int8_t>{0, 1});
  // No match: every input unknown.
  m = MatchSchemas(reg.Lookup("aten::sin"), {Observed::kOther});
  CHECK(m.empty());
  CHECK(InputsAreMutable(m, 1) == std::vector<int8_t>{-1});
  // cat with a (1.13, uncaptured) empty tensor list still matches.
  m = MatchSchemas(reg.Lookup("aten::cat"), {Observed::kTensorList, Observed::kInt});
  CHECK(m.size() == 1);
}

TEST_CASE("registry: a trace's schemas override the built-in ones") {
  auto reg = SchemaRegistry::Builtin();
  REQUIRE(reg.Override("my::op", {"my::op(Tensor(a!) self) -> Tensor(a!)"}).ok());
  REQUIRE(reg.Lookup("my::op")->size() == 1);
  CHECK(reg.AnyOverloadWrites("my::op", 0));
  CHECK_FALSE(reg.Override("my::op", {"other::op(Tensor self) -> Tensor"}).ok());
  CHECK_FALSE(reg.Override("my::op", {"my::op(Tensor self"}).ok());
  // A rejected override leaves the one before it; a later one replaces it
  // even after a lookup parsed it (overrides are kept as text, parsed on
  // first lookup).
  CHECK(reg.AnyOverloadWrites("my::op", 0));
  REQUIRE(reg.Override("my::op", {"my::op(Tensor self) -> Tensor",
                                  "my::op.two(Tensor self, Tensor other) -> Tensor"})
              .ok());
  CHECK(reg.Lookup("my::op")->size() == 2);
  CHECK_FALSE(reg.AnyOverloadWrites("my::op", 0));
  // A built-in name: the override replaces every built-in overload, before
  // and after the built-in ones were parsed.
  auto reg2 = SchemaRegistry::Builtin();
  REQUIRE(reg2.Lookup("aten::add")->size() >= 4);
  REQUIRE(reg2.Override("aten::add", {"aten::add(Tensor(a!) self) -> Tensor(a!)"}).ok());
  REQUIRE(reg2.Lookup("aten::add")->size() == 1);
  CHECK(reg2.AnyOverloadWrites("aten::add", 0));
  REQUIRE(reg.Override("aten::sin", {"aten::sin(Tensor self) -> Tensor"}).ok());
  REQUIRE(reg.Lookup("aten::sin")->size() == 1);
  CHECK(reg.Lookup("aten::sin_")->size() >= 1);  // a neighbouring name keeps its own
  CHECK(reg.CheckAll().ok());
}

TEST_CASE("schema: nesting is bounded, with a one-line error, not a stack overflow") {
  // A fuzzed trace (tests/fuzz/regressions/pipeline-schema-nested-tuples.trace)
  // overflowed the stack with 20745 '(' in one argument's type.
  const auto nested = [](const std::string& open, const std::string& inner,
                         const std::string& close, int n) {
    std::string type;
    for (int i = 0; i < n; ++i) type += open;
    type += inner;
    for (int i = 0; i < n; ++i) type += close;
    return "aten::f(" + type + " x) -> Tensor";
  };
  for (const auto& [open, close] :
       {std::pair<std::string, std::string>{"(", ")"}, {"List(", ")"}, {"Optional(", ")"}}) {
    CAPTURE(open);
    const auto deep = ParseSchema(nested(open, "Tensor", close, 5000));
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.status().message().find("more than 64 nested types") != std::string::npos);
    CHECK(deep.status().message().find('\n') == std::string::npos);
    CHECK(ParseSchema(nested(open, "Tensor", close, 64)).ok());
    CHECK_FALSE(ParseSchema(nested(open, "Tensor", close, 65)).ok());
  }
  // Wrappers after a type count too: lists and optionals build the same tree.
  CHECK_FALSE(ParseSchema(nested("", "Tensor", "[]?", 15000)).ok());
  CHECK(ParseSchema(nested("", "Tensor", "[]", 64)).ok());
  CHECK_FALSE(ParseSchema(nested("", "Tensor", "[]", 65)).ok());
  // The count is per argument: 40 in each of two is fine.
  CHECK(ParseSchema("aten::f(" + std::string(40, '(') + "Tensor" + std::string(40, ')') + " x, " +
                    std::string(40, '(') + "Tensor" + std::string(40, ')') + " y) -> Tensor")
            .ok());
}
