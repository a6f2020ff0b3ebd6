#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<Conv2d<1, 16, 3>::bind<Shape<1, 28, 28>>::output_shape, Shape<16, 26, 26>>);
static_assert(std::is_same_v<Conv2d<1, 16, 5, 1, 2>::bind<Shape<1, 28, 28>>::output_shape, Shape<16, 28, 28>>);
static_assert(std::is_same_v<Conv2d<2, 4, 5, 2, 2>::bind<Shape<2, 11, 10>>::output_shape, Shape<4, 6, 5>>);
static_assert(Conv2d<3, 5, 3>::accepts<Shape<3, 9, 9>> && !Conv2d<3, 5, 3>::accepts<Shape<2, 9, 9>>);
static_assert(!Conv2d<3, 5, 3>::accepts<Shape<27>>);

TEST_CASE("Conv2d: matches PyTorch, 3->5 channels, k3, 9x8 input") {
  check_layer_fixture<Conv2d<3, 5, 3>, Shape<3, 9, 8>>("layer_conv2d_k3");
}
TEST_CASE("Conv2d: matches PyTorch, k5 stride 2 padding 2") {
  check_layer_fixture<Conv2d<2, 4, 5, 2, 2>, Shape<2, 11, 10>>("layer_conv2d_k5s2p2");
}
TEST_CASE("Conv2d: matches PyTorch, 1x1 kernel") {
  check_layer_fixture<Conv2d<4, 6, 1>, Shape<4, 5, 5>>("layer_conv2d_k1");
}
TEST_CASE("Conv2d: gradients match finite differences") {
  gradcheck_layer<Conv2d<2, 3, 3>, Shape<2, 6, 5>>(2, Mode::train);
  gradcheck_layer<Conv2d<2, 3, 3, 2, 1>, Shape<2, 7, 6>>(2, Mode::train);
}
TEST_CASE("Conv2d: PyTorch's default initialisation bounds") {
  Network<single_layer_net<Shape<16, 8, 8>, Conv2d<16, 32, 3>>> net(5);
  const double bound = 1.0 / std::sqrt(16.0 * 9);
  for (const char* name : {"0.weight", "0.bias"}) {
    const auto v = tensor_values(net, name);
    double lo = 1, hi = -1, mean = 0;
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x), mean += x;
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    if (v.size() > 1000) {
      CHECK(hi > 0.95 * bound); // fills the interval
      CHECK(std::abs(mean / double(v.size())) < 0.05 * bound);
    }
  }
}
