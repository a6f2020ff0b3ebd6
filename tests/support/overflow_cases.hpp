#pragma once
// fp16 overflow handling, the same checks for every engine (tests/precision/mixed_precision.cpp
// on the CPU engines, tests/backend/device/mixed_precision_cases.hpp on the device ones):
// Engine is a TrainEngine<Parallel, MixedPrecision<fp16>, models::ModelC, Adam<>>.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/cohort.hpp>

#include "support/bands.hpp"

namespace cohort::test {

inline EngineOptions overflow_options() {
  EngineOptions o{.seed = 2};
  o.loss_scale.max_consecutive_skips = 0;
  return o;
}

/// A step whose forward overflows (an input infinite in fp16) is skipped: weights and optimiser
/// untouched, one skip counted, the scale halved; the next step goes ahead.
template <class Engine>
void check_overflow_skips_step() {
  const Bands data(64, 1);
  Engine e(Adam({.lr = 1e-3}), overflow_options());
  e.step({data.image(0), 16}, std::span<const std::int32_t>(data.y.data(), 16), {});
  const std::vector<float> before(e.parameters().values.begin(), e.parameters().values.end());
  const auto steps = e.optimizer().steps();
  std::vector<float> poisoned(data.x.begin(), data.x.begin() + 16 * 784);
  poisoned[100] = 1e6f; // infinite in fp16: the forward overflows, the gradients are inf/NaN
  e.step({poisoned.data(), 16}, std::span<const std::int32_t>(data.y.data(), 16), {.step = 1, .forward_pass = 1});
  CHECK(std::equal(before.begin(), before.end(), e.parameters().values.begin()));
  CHECK(e.optimizer().steps() == steps);
  CHECK(e.skipped_steps() == 1);
  CHECK(e.loss_scale() == 32768.0);
  e.step({data.image(16), 16}, std::span<const std::int32_t>(data.y.data() + 16, 16), {.step = 2, .forward_pass = 2});
  CHECK(e.optimizer().steps() == steps + 1);
  CHECK_FALSE(std::equal(before.begin(), before.end(), e.parameters().values.begin()));
}

/// Two replicas: an overflow in replica 1's shard alone stops both.
template <class Engine>
void check_overflow_in_one_shard_skips_all() {
  const Bands data(64, 1);
  Engine e(Adam({.lr = 1e-3}), overflow_options());
  std::vector<float> poisoned(data.x.begin(), data.x.begin() + 16 * 784);
  poisoned[12 * 784 + 5] = -1e6f; // sample 12: replica 1's shard
  e.step({poisoned.data(), 16}, std::span<const std::int32_t>(data.y.data(), 16), {});
  CHECK(e.optimizer().steps() == 0);
  CHECK(e.skipped_steps() == 1);
  CHECK(e.loss_scale() == 32768.0);
}

} // namespace cohort::test
