#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<MaxPool2d<2>::bind<Shape<3, 9, 8>>::output_shape, Shape<3, 4, 4>>);
static_assert(std::is_same_v<MaxPool2d<3, 2, 1>::bind<Shape<2, 9, 9>>::output_shape, Shape<2, 5, 5>>);

TEST_CASE("MaxPool2d: matches PyTorch, k2 on odd sizes") {
  check_layer_fixture<MaxPool2d<2>, Shape<3, 9, 8>>("layer_max_pool2d_k2");
}
TEST_CASE("MaxPool2d: matches PyTorch, k3 stride 2 padding 1") {
  check_layer_fixture<MaxPool2d<3, 2, 1>, Shape<2, 9, 9>>("layer_max_pool2d_k3s2p1");
}
TEST_CASE("MaxPool2d: ties go to the first maximum, as in PyTorch") {
  check_layer_fixture<MaxPool2d<2>, Shape<2, 6, 6>>("layer_max_pool2d_ties");
}
TEST_CASE("MaxPool2d: gradients match finite differences") {
  gradcheck_layer<MaxPool2d<2>, Shape<2, 6, 5>>(2, Mode::train);
  gradcheck_layer<MaxPool2d<3, 2, 1>, Shape<1, 7, 7>>(2, Mode::train);
}
TEST_CASE("MaxPool2d: NaN propagates") {
  Network<single_layer_net<Shape<1, 2, 2>, MaxPool2d<2>>> net;
  std::vector<float> x{1.f, std::numeric_limits<float>::quiet_NaN(), 5.f, 2.f};
  auto y = net.forward(ConstBatchView<Shape<1, 2, 2>, float>(x.data(), 1));
  CHECK(std::isnan(y.data()[0]));
}
