#pragma once
// CrossEntropyLoss's label smoothing and class weights on the device backend `Dev` (chosen by the
// including file): the kernels against torch's values and the CPU's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/cross_entropy_fixture.hpp"
#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
namespace loss_options {

using S = Shape<CrossEntropyCase::classes>;

} // namespace loss_options
} // namespace

// The device may sum rows in another order than the CPU and a GPU's exp rounds differently:
// loss and gradient within 1e-6 relative of the CPU's (measured: equal on Thrust's OpenMP
// system), and the CPU test's torch bounds (float: loss 1.5e-7 relative, gradient 4.2e-7
// absolute, measured here at most 6.2e-8 after unscaling; tests/loss/cross_entropy_options.cpp).
TEST_CASE("device losses: CrossEntropyLoss with smoothing and class weights matches torch and the CPU") {
  using namespace loss_options;
  for (const auto& c : cross_entropy_cases()) {
    INFO("case " << c.name);
    const auto x = c.logits_float();
    DeviceBuffer<float> xd;
    xd.assign_from_host(x.data(), x.size());
    CrossEntropyLoss<float> cpu(c.options);
    CrossEntropyLoss<float, Dev> dev(c.options);
    const double l_cpu = cpu.forward(ConstBatchView<S, float>(x.data(), c.rows()), c.labels, 3.0);
    const double l_dev = dev.forward(ConstBatchView<S, float>(xd.data(), c.rows()), c.labels, 3.0);
    CHECK(l_dev == doctest::Approx(l_cpu).epsilon(1e-6));
    CHECK(std::abs(l_dev - c.loss64) <= 1.5e-7 * std::abs(c.loss64));
    const auto g = copy_to_host(dev.backward().data(), x.size());
    COHORT_CHECK_CLOSE(g, std::span(cpu.backward().data(), x.size()), 1e-6, "gradient vs the CPU's");
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(double(g[i]) / 3.0 - c.grad64[i]));
    CHECK(worst <= 4.2e-7);
    // A shard divided by a larger batch's total, as the engines call it.
    const double half = dev.forward(ConstBatchView<S, float>(xd.data(), 3), std::span(c.labels).first(3), 1.0, 2 * 7.5);
    const double half_cpu =
        cpu.forward(ConstBatchView<S, float>(x.data(), 3), std::span(c.labels).first(3), 1.0, 2 * 7.5);
    CHECK(half == doctest::Approx(half_cpu).epsilon(1e-6));
  }
}

TEST_CASE("device losses: CrossEntropyLoss options are checked before any device work") {
  DeviceBuffer<float> x(2 * 10);
  CrossEntropyLoss<float, Dev> three({.class_weights = {1, 2, 3}});
  CHECK_THROWS_AS(three.forward(ConstBatchView<Shape<10>, float>(x.data(), 2), std::vector<std::int32_t>{0, 1}),
                  ShapeError);
  CHECK_THROWS_AS((CrossEntropyLoss<float, Dev>({.label_smoothing = -1})), ValueError);
}
