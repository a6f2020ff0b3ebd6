#pragma once
// The device engines with CrossEntropyLoss's label smoothing and class weights on the device
// backend `Dev` (chosen by the including file): split batches are normalised by the step's
// weight total, as on the CPU (tests/train/engine/loss_options.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
namespace loss_options_engines {

/// Smoothing and uneven weights, one class of weight 0.
const CrossEntropyOptions weighted{.label_smoothing = 0.1,
                                   .class_weights = {1.f, 2.f, 0.5f, 1.5f, 3.f, 0.25f, 1.f, 2.5f, 0.f, 4.f}};

template <class Parallel, class Precision = FullPrecision>
using Engine = cohort::detail::TrainEngine<Parallel, Precision, models::ModelC, Sgd<>>;

/// `steps` SGD steps on consecutive batches of `batch` samples; returns the losses.
template <class E>
std::vector<double> train(E& e, const Bands& data, std::size_t batch, std::size_t steps) {
  std::vector<double> losses;
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t first = (s * batch) % (data.size() - batch + 1);
    losses.push_back(e.step({data.image(first), batch}, std::span<const std::int32_t>(data.y.data() + first, batch),
                            {.step = s, .forward_pass = s}));
  }
  return losses;
}

} // namespace loss_options_engines
} // namespace

// One device against the CPU engine (the same losses to rounding: 1e-5 relative per step, the
// device's GEMMs sum in another order), and MixedPrecision<fp16> with the same loss: step losses
// within 5e-2 of the float run's (tests/train/engine/loss_options.cpp).
TEST_CASE("device engines: SingleDevice with class weights and smoothing follows the CPU engine, fp16 trains") {
  using namespace loss_options_engines;
  const Bands data(64, 2);
  const Sgd opt({.lr = 0.1});
  const EngineOptions o{.seed = 3, .loss = weighted};
  Engine<SingleDevice<Dev>> one(opt, o);
  Engine<SingleDevice<Dev>, MixedPrecision<fp16>> half(opt, o);
  const auto l1 = train(one, data, 7, 4), lh = train(half, data, 7, 4);
  for (std::size_t s = 0; s < l1.size(); ++s) CHECK(lh[s] == doctest::Approx(l1[s]).epsilon(5e-2));
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  Engine<SingleDevice<>> cpu(opt, o);
  const auto lc = train(cpu, data, 7, 4);
  for (std::size_t s = 0; s < l1.size(); ++s) CHECK(l1[s] == doctest::Approx(lc[s]).epsilon(1e-5));
#endif
  CHECK(std::all_of(lh.begin(), lh.end(), [](double l) { return std::isfinite(l); }));
}

#if !defined(__CUDACC__) // ThreadedReplicas<N, Cuda> needs NCCL (tests/cuda/nccl/); the shard code is shared
// Uneven shards have uneven weight totals: both replicas divide by the step's total (1e-6 of each
// tensor's largest value, as the unweighted replica tests).
TEST_CASE("device engines: class weights and smoothing, 2 replicas x uneven shards == one device") {
  COHORT_REQUIRE_DEVICES(2);
  using namespace loss_options_engines;
  const Bands data(64, 2);
  const Sgd opt({.lr = 0.1});
  const EngineOptions o{.seed = 3, .loss = weighted};
  Engine<SingleDevice<Dev>> one(opt, o);
  Engine<ThreadedReplicas<2, Dev>> two(opt, o);
  const auto l1 = train(one, data, 7, 4), l2 = train(two, data, 7, 4);
  for (std::size_t s = 0; s < l1.size(); ++s) CHECK(l2[s] == doctest::Approx(l1[s]).epsilon(1e-6));
  const std::vector<float> a(two.parameters().values.begin(), two.parameters().values.end());
  const std::vector<float> b(one.parameters().values.begin(), one.parameters().values.end());
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, a, b, 1e-6, "2 device replicas vs one device");
}
#endif
