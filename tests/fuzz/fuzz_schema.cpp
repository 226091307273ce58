// Fuzz target: the operator schema parser, the registry built on it and the
// matcher (observed argument kinds derived from the input's bytes).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/schema/schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1u << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = memtl::ParseSchema(text);
  if (!parsed.ok()) return 0;
  const memtl::FunctionSchema& schema = parsed.value();
  memtl::SchemaRegistry registry;
  if (!registry.Override(schema.name, {text}).ok()) return 0;
  (void)registry.CheckAll();
  const auto* schemas = registry.Lookup(schema.name);
  if (schemas == nullptr) return 0;
  // One observed kind per argument (plus one extra), taken from the bytes.
  std::vector<memtl::Observed> observed;
  for (size_t i = 0; i <= schema.arguments.size(); ++i) {
    observed.push_back(static_cast<memtl::Observed>(data[i % size] % 9));
    if (i < schema.arguments.size()) {
      (void)memtl::TypeMatches(observed.back(), schema.arguments[i].type);
      (void)registry.AnyOverloadWrites(schema.name, i);
    }
  }
  for (size_t n : {observed.size() - 1, observed.size()}) {
    const std::vector<memtl::Observed> obs(observed.begin(),
                                           observed.begin() + static_cast<std::ptrdiff_t>(n));
    const auto matches = memtl::MatchSchemas(schemas, obs);
    (void)memtl::InputsAreMutable(matches, obs.size());
    const std::vector<memtl::Observed> tensors(n, memtl::Observed::kTensor);
    (void)memtl::InputsAreMutable(memtl::MatchSchemas(schemas, tensors), n);
  }
  return 0;
}
