// ConvTranspose2d (layers/conv_transpose2d.hpp) against torch.nn.ConvTranspose2d: the U-Net's
// 2x2 stride-2 up-convolution, output_padding, no bias, DCGAN's 4x4 stride 2, a 1x1, stride 3,
// padding at the kernel size (each reaching a different path of the convolution it transposes);
// finite differences; torch's initialisation bounds; the output-size rule at compile time.

#include <doctest/doctest.h>

#include <cmath>

#include <cohort/layers/conv_transpose2d.hpp>

#include "support/layer_harness.hpp"
#include "support/thread_independence.hpp"

using namespace cohort;
using namespace cohort::test;

// out = (in - 1) * stride - 2 * padding + kernel + output_padding, torch's rule.
static_assert(std::is_same_v<ConvTranspose2d<4, 3, 2, 2>::bind<Shape<4, 3, 5>>::output_shape, Shape<3, 6, 10>>);
static_assert(std::is_same_v<ConvTranspose2d<3, 5, 3, 2, 1, 1>::bind<Shape<3, 4, 4>>::output_shape, Shape<5, 8, 8>>);
static_assert(std::is_same_v<ConvTranspose2d<2, 3, 2, 1, 2>::bind<Shape<2, 6, 5>>::output_shape, Shape<3, 3, 2>>);
static_assert(ConvTranspose2d<3, 5, 3>::accepts<Shape<3, 4, 4>> && !ConvTranspose2d<3, 5, 3>::accepts<Shape<2, 4, 4>>);
static_assert(!ConvTranspose2d<3, 5, 3>::accepts<Shape<12>>);
// Weights (In, Out, K, K) as torch's; the bias only with it.
static_assert(single_layer_net<Shape<4, 3, 5>, ConvTranspose2d<4, 3, 2, 2>>::parameter_count == 4 * 3 * 4 + 3);
static_assert(single_layer_net<Shape<3, 5, 6>, ConvTranspose2d<3, 4, 3, 1, 1, 0, false>>::parameter_count == 3 * 4 * 9);

TEST_CASE("ConvTranspose2d: matches PyTorch (2x2 stride 2, 3x3 stride 2 with output_padding, stride 1 without bias)") {
  check_layer_fixture<ConvTranspose2d<4, 3, 2, 2>, Shape<4, 3, 5>>("conv_transpose_k2_s2");
  check_layer_fixture<ConvTranspose2d<3, 5, 3, 2, 1, 1>, Shape<3, 4, 4>>("conv_transpose_k3_s2_p1_op1");
  check_layer_fixture<ConvTranspose2d<3, 4, 3, 1, 1, 0, false>, Shape<3, 5, 6>>("conv_transpose_k3_s1_p1_nobias");
}
TEST_CASE("ConvTranspose2d: matches PyTorch (4x4 stride 2, 1x1, stride 3 with output_padding 2, padding >= kernel)") {
  check_layer_fixture<ConvTranspose2d<2, 3, 4, 2, 1>, Shape<2, 3, 3>>("conv_transpose_k4_s2_p1");
  check_layer_fixture<ConvTranspose2d<5, 6, 1>, Shape<5, 4, 4>>("conv_transpose_k1");
  check_layer_fixture<ConvTranspose2d<2, 2, 3, 3, 0, 2>, Shape<2, 3, 4>>("conv_transpose_k3_s3_op2");
  check_layer_fixture<ConvTranspose2d<2, 3, 2, 1, 2>, Shape<2, 6, 5>>("conv_transpose_k2_s1_p2");
}
TEST_CASE("ConvTranspose2d: gradients match finite differences") {
  gradcheck_layer<ConvTranspose2d<2, 3, 2, 2>, Shape<2, 3, 4>>(2, Mode::train);
  gradcheck_layer<ConvTranspose2d<3, 2, 3, 2, 1, 1>, Shape<3, 3, 3>>(2, Mode::train);
  gradcheck_layer<ConvTranspose2d<2, 2, 3, 1, 1, 0, false>, Shape<2, 4, 3>>(2, Mode::train);
}
TEST_CASE("ConvTranspose2d: PyTorch's default initialisation bounds (fan_in from the output channels)") {
  // torch's kaiming_uniform_(a=sqrt(5)) reads fan_in = weight.size(1) * K * K = Out * K * K.
  Network<single_layer_net<Shape<32, 4, 4>, ConvTranspose2d<32, 16, 3>>> net(5);
  const double bound = 1.0 / std::sqrt(16.0 * 9);
  for (const char* name : {"0.weight", "0.bias"}) {
    const auto v = tensor_values(net, name);
    double lo = 1, hi = -1;
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x);
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    if (v.size() > 1000) CHECK(hi > 0.95 * bound);
  }
  CHECK(ConvTranspose2d<16, 8, 2, 2>::signature() == "ConvTranspose2d<16,8,2,2,0,0>");
  CHECK(ConvTranspose2d<8, 8, 3, 1, 1, 0, false>::signature() == "ConvTranspose2d<8,8,3,1,1,0,false>");
}
TEST_CASE("ConvTranspose2d: the same bits on 1, 2 and 3 threads (stride 2 with output_padding, 2x2 stride 2)") {
  check_same_bits_on_1_2_3_threads<single_layer_net<Shape<8, 7, 7>, ConvTranspose2d<8, 6, 3, 2, 1, 1>>>(6, 5);
  check_same_bits_on_1_2_3_threads<single_layer_net<Shape<8, 7, 7>, ConvTranspose2d<8, 4, 2, 2>>>(6, 5);
}
