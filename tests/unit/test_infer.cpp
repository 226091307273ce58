// The inference rules (core/infer/infer.cpp) on small Kineto traces.
#include <doctest/doctest.h>

#include "core/pipeline/analysis.h"

using namespace memtl;
