#pragma once
// The CPU engines' tests drive detail::TrainEngine directly: its name with full precision as the
// default, and a flat copy of its parameters for bitwise comparisons.

#include <vector>

#include <cohort/precision/full_precision.hpp>
#include <cohort/train/engine/engine.hpp>

namespace cohort::test {

template <class Parallel, class Net, class Opt, class Precision = FullPrecision>
using EngineOf = detail::TrainEngine<Parallel, Precision, Net, Opt>;

/// The engine's parameters, copied.
template <class Engine>
std::vector<float> engine_values(Engine& e) {
  return {e.parameters().values.begin(), e.parameters().values.end()};
}

} // namespace cohort::test
