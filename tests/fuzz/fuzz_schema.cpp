// Fuzz target: the operator schema parser and the registry built on it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/schema/schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = memtl::ParseSchema(text);
  if (!parsed.ok()) return 0;
  memtl::SchemaRegistry registry;
  if (registry.Override(parsed.value().name, {text}).ok()) {
    const auto* schemas = registry.Lookup(parsed.value().name);
    if (schemas != nullptr) {
      std::vector<memtl::Observed> observed(parsed.value().arguments.size(), memtl::Observed::kTensor);
      auto matches = memtl::MatchSchemas(schemas, observed);
      (void)memtl::InputsAreMutable(matches, observed.size());
    }
  }
  return 0;
}
