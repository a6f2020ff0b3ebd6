#pragma once
// The classification losses on the device backend `Dev` (chosen by the including file) against the CPU's (which match
// PyTorch: tests/loss/).
#include <doctest/doctest.h>

#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("device losses: CrossEntropyLoss and NllLoss match the CPU, gradients scaled") {
  constexpr std::size_t rows = 37, cols = 10;
  auto x = random_values(rows * cols, 5);
  for (auto& v : x) v *= 30.f; // large logits: the log-sum-exp must stay finite
  std::vector<std::int32_t> labels(rows);
  for (std::size_t r = 0; r < rows; ++r) labels[r] = std::int32_t((r * 7) % cols);
  DeviceBuffer<float> xd;
  xd.assign_from_host(x.data(), x.size());
  using S = Shape<cols>;

  CrossEntropyLoss<float> ce_cpu;
  CrossEntropyLoss<float, Dev> ce_dev;
  const double l_cpu = ce_cpu.forward(ConstBatchView<S, float>(x.data(), rows), labels, 4.0);
  const double l_dev = ce_dev.forward(ConstBatchView<S, float>(xd.data(), rows), labels, 4.0);
  CHECK(std::isfinite(l_dev));
  CHECK(l_dev == doctest::Approx(l_cpu).epsilon(1e-6));
  const auto g_cpu = ce_cpu.backward();
  const auto g_dev = ce_dev.backward();
  COHORT_CHECK_CLOSE(copy_to_host(g_dev.data(), rows * cols), std::span(g_cpu.data(), rows * cols), 1e-6,
                     "cross-entropy gradient");

  // NLL on log-probabilities (the CPU's log-softmax output as input).
  NllLoss<float> nll_cpu;
  NllLoss<float, Dev> nll_dev;
  std::vector<float> logp(rows * cols);
  {
    Network<Sequential<Input<cols>, LogSoftmax>> ls;
    const auto y = ls.forward(ConstBatchView<S, float>(x.data(), rows));
    std::copy(y.data(), y.data() + rows * cols, logp.begin());
  }
  DeviceBuffer<float> logpd;
  logpd.assign_from_host(logp.data(), logp.size());
  const double n_cpu = nll_cpu.forward(ConstBatchView<S, float>(logp.data(), rows), labels);
  const double n_dev = nll_dev.forward(ConstBatchView<S, float>(logpd.data(), rows), labels);
  CHECK(n_dev == doctest::Approx(n_cpu).epsilon(1e-9));
  COHORT_CHECK_CLOSE(copy_to_host(nll_dev.backward().data(), rows * cols),
                     std::span(nll_cpu.backward().data(), rows * cols), 0.0, "nll gradient");
}

TEST_CASE("device losses: a label out of range is refused before any device work") {
  NllLoss<float, Dev> nll;
  DeviceBuffer<float> x(2 * 3);
  const std::vector<std::int32_t> labels{0, 3};
  CHECK_THROWS_AS(nll.forward(ConstBatchView<Shape<3>, float>(x.data(), 2), labels), ValueError);
}

TEST_CASE("device losses: PixelCrossEntropyLoss matches the CPU (ignore_index, class weights, label smoothing)") {
  constexpr std::size_t batch = 3, classes = 4, plane = 5 * 6;
  using S = Shape<classes, 5, 6>;
  auto x = random_values(batch * S::size, 11);
  for (auto& v : x) v *= 8.f; // spread scores: some pixels near-certain, the log-sum-exp must stay finite
  std::vector<std::int32_t> labels(batch * plane);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = i % 7 == 3 ? 255 : std::int32_t((i * 5) % classes);
  DeviceBuffer<float> xd;
  xd.assign_from_host(x.data(), x.size());
  for (const bool options : {false, true}) {
    CAPTURE(options);
    PixelCrossEntropyOptions o{.ignore_index = 255};
    if (options) {
      o.label_smoothing = 0.1;
      o.class_weights = {1.f, 2.f, 0.5f, 3.f};
    }
    PixelCrossEntropyLoss<float> cpu(o);
    PixelCrossEntropyLoss<float, Dev> dev(o);
    const double l_cpu = cpu.forward(ConstBatchView<S, float>(x.data(), batch), labels, 2.0);
    const double l_dev = dev.forward(ConstBatchView<S, float>(xd.data(), batch), labels, 2.0);
    // Both reduce in double, the device's pixels in another order.
    CHECK(l_dev == doctest::Approx(l_cpu).epsilon(1e-12));
    CHECK(dev.denominator() == cpu.denominator());
    COHORT_CHECK_CLOSE(copy_to_host(dev.backward().data(), batch * S::size),
                       std::span(cpu.backward().data(), batch * S::size), 1e-6, "per-pixel cross-entropy gradient");
    // A shard of a larger batch divides by the denominator it is given.
    const double l_half = dev.forward(ConstBatchView<S, float>(xd.data(), batch), labels, 1.0, 4 * cpu.denominator());
    CHECK(l_half == doctest::Approx(l_cpu / 4).epsilon(1e-12));
  }
  // Every pixel ignored: loss 0 and a zero gradient (torch: NaN).
  PixelCrossEntropyLoss<float, Dev> dev({.ignore_index = 255});
  const std::vector<std::int32_t> ignored(batch * plane, 255);
  CHECK(dev.forward(ConstBatchView<S, float>(xd.data(), batch), ignored) == 0.0);
  for (const float g : copy_to_host(dev.backward().data(), batch * S::size)) REQUIRE(g == 0.f);
  // A label that is neither a class nor ignore_index is refused before any device work.
  std::vector<std::int32_t> bad = labels;
  bad[plane + 7] = 4;
  CHECK_THROWS_WITH_AS(dev.forward(ConstBatchView<S, float>(xd.data(), batch), bad),
                       doctest::Contains("label of sample 1 at pixel (1, 1) is 4"), ValueError);
}
