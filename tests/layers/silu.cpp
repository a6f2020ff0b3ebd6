#include <doctest/doctest.h>

#include <cmath>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("SiLU: matches PyTorch, including 0 and |x| up to 100") {
  check_layer_fixture<SiLU, Shape<3, 5, 5>>("layer_silu");
}
TEST_CASE("SiLU: gradients match finite differences") { gradcheck_layer<SiLU, Shape<2, 3, 4>>(3, Mode::train); }
TEST_CASE("SiLU: element by element against double precision, no overflow far out") {
  const std::vector<float> x{0.f,   1e-6f, -1e-6f, 0.5f, -0.5f, 1.f,   -1.f,   5.f,  -5.f,  20.f,
                             -20.f, 88.f,  -88.f,  89.f, -89.f, 100.f, -100.f, 1e4f, -1e4f, 3.25f};
  using In = Shape<20>;
  Network<single_layer_net<In, SiLU>> net;
  const auto y = net.forward(ConstBatchView<In, float>(x.data(), 1));
  const std::vector<float> ones(20, 1.f);
  const auto dx = net.backward(ConstBatchView<In, float>(ones.data(), 1), {.input_grad = true});
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    const double v = double(x[i]), s = 1.0 / (1.0 + std::exp(-v));
    const double want = v * s, want_grad = s * (1.0 + v * (1.0 - s));
    CHECK(std::isfinite(y.data()[i]));
    CHECK(std::isfinite(dx.data()[i]));
    CHECK(std::abs(double(y.data()[i]) - want) <= 1e-6 * std::abs(want) + 1e-30);
    CHECK(std::abs(double(dx.data()[i]) - want_grad) <= 1e-6 * std::abs(want_grad) + 1e-30);
  }
}
