#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
double gelu_exact(double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double gelu_grad_exact(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * 3.14159265358979323846);
}
} // namespace

TEST_CASE("GELU: matches PyTorch (approximate='none')") { check_layer_fixture<GELU, Shape<3, 5, 5>>("layer_gelu"); }
TEST_CASE("GELU: matches PyTorch near 0 and for large |x|") {
  check_layer_fixture<GELU, Shape<16>>("layer_gelu_near_zero");
  check_layer_fixture<GELU, Shape<16>>("layer_gelu_large");
}
TEST_CASE("GELU: gradients match finite differences") { gradcheck_layer<GELU, Shape<2, 3, 4>>(3, Mode::train); }
TEST_CASE("GELU: the erf form, element by element, near 0 and far out (float against double)") {
  // Relative to each value (not to the tensor's largest): the tanh approximation is off by 1.5e-4
  // at x = 1 and by 2e-5 relative at x = -1e-1... this holds every element to 1e-6 of itself (or
  // 2e-8 absolute, where x * Phi(x) is tiny).
  const std::vector<float> x{0.f,  1e-30f, -1e-30f, 1e-8f, -1e-8f, 1e-4f, -1e-4f, 0.1f,  -0.1f,  0.5f,  -0.5f,
                             1.f,  -1.f,   2.f,     -2.f,  3.f,    -3.f,  4.f,    -4.f,  5.5f,   -5.5f, 6.f,
                             -6.f, 10.f,   -10.f,   50.f,  -50.f,  1e4f,  -1e4f,  1e30f, -1e30f, 0.75f};
  using In = Shape<32>;
  Network<single_layer_net<In, GELU>> net;
  const auto y = net.forward(ConstBatchView<In, float>(x.data(), 1));
  const std::vector<float> ones(32, 1.f);
  const auto dx = net.backward(ConstBatchView<In, float>(ones.data(), 1), {.input_grad = true});
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    const double want = gelu_exact(double(x[i])), want_grad = gelu_grad_exact(double(x[i]));
    CHECK(std::abs(double(y.data()[i]) - want) <= 1e-6 * std::abs(want) + 2e-8);
    CHECK(std::abs(double(dx.data()[i]) - want_grad) <= 1e-6 * std::abs(want_grad) + 2e-8);
  }
  CHECK(y.data()[0] == 0.f);
  CHECK(y.data()[11] == doctest::Approx(0.8413447460685429).epsilon(1e-7)); // tanh form: 0.8411920
}
TEST_CASE("GELU: NaN propagates, infinities saturate") {
  const std::vector<float> x{std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
  Network<single_layer_net<Shape<3>, GELU>> net;
  const auto y = net.forward(ConstBatchView<Shape<3>, float>(x.data(), 1));
  CHECK(std::isnan(y.data()[0]));
  CHECK(y.data()[1] == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(y.data()[2])); // -inf * 0, as PyTorch
}
