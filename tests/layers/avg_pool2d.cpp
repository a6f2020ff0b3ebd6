#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<AvgPool2d<2>::bind<Shape<3, 9, 8>>::output_shape, Shape<3, 4, 4>>);
static_assert(std::is_same_v<AvgPool2d<3, 2, 1>::bind<Shape<2, 9, 9>>::output_shape, Shape<2, 5, 5>>);
static_assert(std::is_same_v<AvgPool2d<3, 1, 1>::bind<Shape<2, 6, 7>>::output_shape, Shape<2, 6, 7>>);
static_assert(AvgPool2d<2>::accepts<Shape<1, 2, 2>> && !AvgPool2d<2>::accepts<Shape<4>>);

TEST_CASE("AvgPool2d: matches PyTorch, k2 on odd sizes (floor mode)") {
  check_layer_fixture<AvgPool2d<2>, Shape<3, 9, 8>>("layer_avg_pool2d_k2");
}
TEST_CASE("AvgPool2d: matches PyTorch, k3 stride 2 padding 1 (padding counted in the divisor)") {
  check_layer_fixture<AvgPool2d<3, 2, 1>, Shape<2, 9, 9>>("layer_avg_pool2d_k3s2p1");
}
TEST_CASE("AvgPool2d: matches PyTorch, overlapping windows k3 stride 1 padding 1") {
  check_layer_fixture<AvgPool2d<3, 1, 1>, Shape<2, 6, 7>>("layer_avg_pool2d_k3s1p1");
}
TEST_CASE("AvgPool2d: gradients match finite differences") {
  gradcheck_layer<AvgPool2d<2>, Shape<2, 6, 5>>(2, Mode::train);
  gradcheck_layer<AvgPool2d<3, 2, 1>, Shape<1, 7, 7>>(2, Mode::train);
  gradcheck_layer<AvgPool2d<3, 1, 1>, Shape<2, 4, 5>>(2, Mode::train);
}
TEST_CASE("AvgPool2d: padding counts as zeros in the average (count_include_pad=True)") {
  // A constant plane of ones: a corner window of AvgPool2d<3, 1, 1> covers 4 ones and 5 padding
  // zeros, so it averages to 4/9 (6/9 on an edge, 1 inside); excluding the padding would give 1.
  Network<single_layer_net<Shape<1, 4, 4>, AvgPool2d<3, 1, 1>>> net;
  const std::vector<float> x(16, 1.f);
  const auto y = net.forward(ConstBatchView<Shape<1, 4, 4>, float>(x.data(), 1));
  CHECK(y.data()[0] == doctest::Approx(4.0 / 9.0).epsilon(1e-7));
  CHECK(y.data()[1] == doctest::Approx(6.0 / 9.0).epsilon(1e-7));
  CHECK(y.data()[5] == doctest::Approx(1.0).epsilon(1e-7));
  // Backward: each element receives 1/9 from every window that covers it (4 for a corner).
  const std::vector<float> dy(16, 1.f);
  const auto dx = net.backward(ConstBatchView<Shape<1, 4, 4>, float>(dy.data(), 1), {.input_grad = true});
  CHECK(dx.data()[0] == doctest::Approx(4.0 / 9.0).epsilon(1e-7));
  CHECK(dx.data()[5] == doctest::Approx(1.0).epsilon(1e-7));
}
