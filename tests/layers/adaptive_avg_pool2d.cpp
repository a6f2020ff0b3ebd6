#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<AdaptiveAvgPool2d<1>::bind<Shape<4, 5, 6>>::output_shape, Shape<4, 1, 1>>);
static_assert(std::is_same_v<Sequential<Input<8, 7, 7>, AdaptiveAvgPool2d<1>, Flatten>::output_shape, Shape<8>>);
static_assert(!AdaptiveAvgPool2d<1>::accepts<Shape<8>>);

TEST_CASE("AdaptiveAvgPool2d<1>: matches PyTorch (global average pooling), 5x6 and 7x7 planes") {
  check_layer_fixture<AdaptiveAvgPool2d<1>, Shape<4, 5, 6>>("layer_adaptive_avg_pool2d");
  check_layer_fixture<AdaptiveAvgPool2d<1>, Shape<8, 7, 7>>("layer_adaptive_avg_pool2d_7x7");
}
TEST_CASE("AdaptiveAvgPool2d<1>: gradients match finite differences") {
  gradcheck_layer<AdaptiveAvgPool2d<1>, Shape<3, 4, 5>>(2, Mode::train);
}
TEST_CASE("AdaptiveAvgPool2d<1>: each value is the mean of its plane") {
  Network<single_layer_net<Shape<2, 3, 3>, AdaptiveAvgPool2d<1>>> net;
  std::vector<float> x(18);
  for (std::size_t i = 0; i < 18; ++i) x[i] = float(i);
  const auto y = net.forward(ConstBatchView<Shape<2, 3, 3>, float>(x.data(), 1));
  CHECK(y.data()[0] == 4.f);  // (0 + ... + 8) / 9
  CHECK(y.data()[1] == 13.f); // (9 + ... + 17) / 9
}
