// The standard headers most of memtl's sources include, precompiled once
// (CMakeLists.txt, MEMTL_PCH). Sources still include what they use.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
