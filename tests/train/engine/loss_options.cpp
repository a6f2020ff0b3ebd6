// CrossEntropyOptions (label smoothing, class weights) through the CPU engines: a split batch is
// normalised by the whole step's weight total, so replicas and chunks give the single-device
// result, deterministic mode stays bitwise the same for any replica count, and mixed precision
// trains. (The Trainer's side: tests/train/loss_options.cpp.)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/engine_harness.hpp"

using namespace cohort;

namespace {

using test::Bands;
using test::EngineOf;
using test::relative_difference;

/// Smoothing and uneven weights, one class of weight 0 (its samples still carry a smoothed loss).
const CrossEntropyOptions weighted{.label_smoothing = 0.1,
                                   .class_weights = {1.f, 2.f, 0.5f, 1.5f, 3.f, 0.25f, 1.f, 2.5f, 0.f, 4.f}};

EngineOptions options(bool deterministic = false, const CrossEntropyOptions& loss = weighted) {
  EngineOptions o{.seed = 3, .loss = loss};
  o.parallel.deterministic = deterministic;
  o.parallel.deterministic_chunks = 4;
  return o;
}

/// `steps` optimiser steps on consecutive batches of `batch` samples; returns the losses.
template <class Engine>
std::vector<double> train(Engine& e, const Bands& data, std::size_t batch, std::size_t steps) {
  std::vector<double> losses;
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t first = (s * batch) % (data.size() - batch + 1);
    losses.push_back(e.step({data.image(first), batch}, std::span<const std::int32_t>(data.y.data() + first, batch),
                            {.step = s, .forward_pass = s}));
  }
  return losses;
}

} // namespace

// Uneven shards (5 and 7 samples on 2 and 3 replicas) have uneven weight totals: weighting them
// by count / n would be wrong by far more than 1e-6 (measured: the tolerance in compare.hpp's
// units, tensor by tensor, as the unweighted test in threaded_replicas.cpp).
TEST_CASE("Loss options: replicas with class weights and smoothing == one device (uneven shards, 1e-6)") {
  const Bands data(64, 2);
  const Sgd opt({.lr = 0.1});
  for (const std::size_t batch : {5, 7}) {
    INFO("batch " << batch);
    EngineOf<SingleDevice<>, models::ModelC, Sgd<>> one(opt, options());
    EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>> two(opt, options());
    EngineOf<ThreadedReplicas<3>, models::ModelC, Sgd<>> three(opt, options());
    const auto l1 = train(one, data, batch, 4);
    const auto l2 = train(two, data, batch, 4);
    const auto l3 = train(three, data, batch, 4);
    for (std::size_t s = 0; s < l1.size(); ++s) {
      CHECK(l2[s] == doctest::Approx(l1[s]).epsilon(1e-6));
      CHECK(l3[s] == doctest::Approx(l1[s]).epsilon(1e-6));
    }
    COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(two), test::engine_values(one), 1e-6,
                               "2 replicas vs one device");
    COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(three), test::engine_values(one), 1e-6,
                               "3 replicas vs one device");
    EngineOf<SingleDevice<>, models::ModelC, Sgd<>> plain(opt, options(false, {}));
    train(plain, data, batch, 4);
    CHECK(relative_difference(test::engine_values(one), test::engine_values(plain)) >
          1e-3); // the options changed training
  }
}

TEST_CASE("Loss options: deterministic mode is bitwise the same for 1, 2 and 4 replicas (weights + smoothing)") {
  const Bands data(256, 3);
  const Adam opt({.lr = 1e-3});
  SUBCASE("float") {
    EngineOf<ThreadedReplicas<1>, models::ModelC, Adam<>> r1(opt, options(true));
    EngineOf<ThreadedReplicas<2>, models::ModelC, Adam<>> r2(opt, options(true));
    EngineOf<ThreadedReplicas<4>, models::ModelC, Adam<>> r4(opt, options(true));
    for (const std::size_t batch : {48, 46}) { // 46: chunks of 12 and 11 samples
      const auto l1 = train(r1, data, batch, 3);
      CHECK(train(r2, data, batch, 3) == l1);
      CHECK(train(r4, data, batch, 3) == l1);
    }
    CHECK(test::engine_values(r1) == test::engine_values(r2));
    CHECK(test::engine_values(r1) == test::engine_values(r4));
    // The chunked sums are not the one-pass sums: close in units of lr (threaded_replicas.cpp).
    EngineOf<SingleDevice<>, models::ModelC, Adam<>> one(opt, options());
    train(one, data, 48, 3);
    train(one, data, 46, 3);
    COHORT_CHECK_CLOSE_ABS(test::engine_values(r1), test::engine_values(one), 0.0, 0.05 * 1e-3,
                           "4 chunks vs one pass, in units of lr");
  }
  SUBCASE("MixedPrecision<bf16>") {
    using P = MixedPrecision<bf16>;
    EngineOf<ThreadedReplicas<1>, models::ModelC, Adam<>, P> r1(opt, options(true));
    EngineOf<ThreadedReplicas<2>, models::ModelC, Adam<>, P> r2(opt, options(true));
    train(r1, data, 48, 3);
    train(r2, data, 48, 3);
    CHECK(test::engine_values(r1) == test::engine_values(r2));
  }
}

// 16-bit storage with the weighted loss: fp16 (loss scaling) and bf16 both train, on one device
// and on two replicas, with step losses within 5e-2 of the float run's (measured at most 4.5e-3
// for fp16, 4.9e-3 for bf16, over 4 SGD steps). The weights are not compared: a few steps move
// the small last-layer tensors by amounts that 16-bit rounding changes by 14-30 %.
TEST_CASE("Loss options: MixedPrecision<fp16> and <bf16> train with class weights and smoothing") {
  const Bands data(128, 4);
  const Sgd opt({.lr = 0.05, .momentum = 0.9});
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> full(opt, options());
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> untrained(opt, options());
  const auto lf = train(full, data, 32, 4);
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>, MixedPrecision<fp16>> half(opt, options());
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>, MixedPrecision<fp16>> half2(opt, options());
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>, MixedPrecision<bf16>> brain2(opt, options());
  const auto lh = train(half, data, 32, 4), lh2 = train(half2, data, 32, 4), lb2 = train(brain2, data, 32, 4);
  double worst_h = 0, worst_b = 0;
  for (std::size_t s = 0; s < lf.size(); ++s) {
    CHECK(std::isfinite(lh[s]));
    CHECK(lh[s] == doctest::Approx(lf[s]).epsilon(5e-2));
    CHECK(lh2[s] == doctest::Approx(lf[s]).epsilon(5e-2));
    CHECK(lb2[s] == doctest::Approx(lf[s]).epsilon(5e-2));
    worst_h = std::max({worst_h, std::abs(lh[s] / lf[s] - 1), std::abs(lh2[s] / lf[s] - 1)});
    worst_b = std::max(worst_b, std::abs(lb2[s] / lf[s] - 1));
  }
  CHECK(half.skipped_steps() == 0);
  MESSAGE("step losses vs float: fp16 " << worst_h << ", bf16 " << worst_b);
  for (const auto& w : {test::engine_values(half), test::engine_values(half2), test::engine_values(brain2)}) {
    CHECK(std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); }));
    CHECK(relative_difference(w, test::engine_values(untrained)) > 1e-3); // it trained
  }
  CHECK(lh.back() < lh.front());
}

TEST_CASE("Loss options: a step whose labels all have classes of weight 0 is a typed error") {
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> e(Sgd({.lr = 0.1}), options());
  const Bands data(8, 1);
  std::vector<std::int32_t> eights(4, 8);
  CHECK_THROWS_WITH_AS(e.step({data.image(0), 4}, eights, {}),
                       doctest::Contains("the class weights of the batch's 4 labels sum to 0"), ValueError);
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>> r(Sgd({.lr = 0.1}), options(true));
  CHECK_THROWS_AS(r.step({data.image(0), 4}, eights, {}), ValueError);
}

TEST_CASE("Loss options: an engine refuses options its loss does not have (NllLoss after LogSoftmax)") {
  CHECK_THROWS_WITH_AS((EngineOf<SingleDevice<>, models::ModelA, Sgd<>>(Sgd({.lr = 0.1}), options())),
                       doctest::Contains("this network ends in LogSoftmax and trains with NllLoss"), ValueError);
  CHECK_THROWS_WITH_AS((EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>>(
                           Sgd({.lr = 0.1}), options(false, {.class_weights = std::vector<float>(9, 1.f)}))),
                       "CrossEntropyLoss: expected 10 class weights (one per class of the scores), found 9",
                       ShapeError);
}
