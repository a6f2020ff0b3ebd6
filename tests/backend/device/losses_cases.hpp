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
