#include <doctest/doctest.h>

#include "support/layer_harness.hpp"
#include "support/thread_independence.hpp"

using namespace cohort;
using namespace cohort::test;

// Shapes at compile time: the output image and the state dict of torch's Conv2d(C, C, K, groups=C).
static_assert(
    std::is_same_v<single_layer_net<Shape<4, 7, 6>, DepthwiseConv2d<4, 3, 1, 1>>::output_shape, Shape<4, 7, 6>>);
static_assert(
    std::is_same_v<single_layer_net<Shape<6, 9, 8>, DepthwiseConv2d<6, 3, 2, 1, false>>::output_shape, Shape<6, 5, 4>>);
static_assert(Network<single_layer_net<Shape<32, 8, 8>, DepthwiseConv2d<32, 3, 1, 1>>>::parameter_count == 32 * 9 + 32);
static_assert(Network<single_layer_net<Shape<32, 8, 8>, DepthwiseConv2d<32, 3, 1, 1, false>>>::parameter_count ==
              32 * 9);
static_assert(!DepthwiseConv2d<4, 3>::accepts<Shape<3, 8, 8>>); // the channel count is checked where it is composed

TEST_CASE("DepthwiseConv2d: matches PyTorch's Conv2d(groups=C) forward, backward and 3 SGD steps") {
  check_layer_fixture<DepthwiseConv2d<4, 3, 1, 1>, Shape<4, 7, 6>>("layer_depthwise_k3p1");
  check_layer_fixture<DepthwiseConv2d<6, 3, 2, 1, false>, Shape<6, 9, 8>>("layer_depthwise_k3s2p1_nobias");
  check_layer_fixture<DepthwiseConv2d<3, 5, 1, 2>, Shape<3, 6, 7>>("layer_depthwise_k5p2");
  check_layer_fixture<DepthwiseConv2d<2, 3, 1, 0, false>, Shape<2, 5, 5>>("layer_depthwise_k3_nobias");
}
TEST_CASE("DepthwiseConv2d: gradients match finite differences (padding, stride 2, bias)") {
  gradcheck_layer<DepthwiseConv2d<3, 3, 1, 1>, Shape<3, 5, 6>>(2, Mode::train);
  gradcheck_layer<DepthwiseConv2d<2, 3, 2, 1, false>, Shape<2, 7, 6>>(2, Mode::train);
  gradcheck_layer<DepthwiseConv2d<2, 5, 1, 2>, Shape<2, 4, 5>>(2, Mode::train);
}
TEST_CASE("DepthwiseConv2d: 1, 2 and 3 threads give bitwise the same output and gradients") {
  check_same_bits_on_1_2_3_threads<single_layer_net<Shape<8, 9, 9>, DepthwiseConv2d<8, 3, 1, 1>>>(6, 5);
}
