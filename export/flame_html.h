// The report's flame graph of the bytes alive at a device's peak: its
// section of the page and its data for flame.js (export/flame_html.cpp).
#pragma once

#include <string>

#include "core/explain/report.h"

namespace memtl::html {

// The section: heading, how to read it, the box flame.js draws into.
// `inferred`: the categories are inferred (the leaves say so).
std::string FlameSection(const DeviceReport& d, bool inferred);

// The device's "flame" member of the data block (JSON, not yet made safe
// for <script>: the caller's ScriptJson does that): {"names":[frame, ...],
// "stacks":[[bytes, category, [name index, ...]], ...]}, the stacks of
// DeviceReport::flame in their order, each frame's text once.
std::string FlameJson(const DeviceReport& d);

}  // namespace memtl::html
