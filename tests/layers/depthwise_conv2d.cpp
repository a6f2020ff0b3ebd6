#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

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
  using In = Shape<8, 9, 9>;
  using Net = single_layer_net<In, DepthwiseConv2d<8, 3, 1, 1>>;
  constexpr std::size_t batch = 6;
  std::vector<float> x(batch * In::size), dy(batch * In::size);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = float((i * 37) % 101) / 50.f - 1.f;
    dy[i] = float((i * 53) % 89) / 44.f - 1.f;
  }
  std::vector<float> first;
  for (std::size_t threads : {1, 2, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    REQUIRE(num_threads() == threads);
    Network<Net> net(5);
    const auto y = net.forward(ConstBatchView<In, float>(x.data(), batch));
    std::vector<float> out(y.data(), y.data() + y.size());
    const auto dx = net.backward(ConstBatchView<In, float>(dy.data(), batch), {.input_grad = true});
    out.insert(out.end(), dx.data(), dx.data() + dx.size());
    out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
    if (first.empty())
      first = out;
    else
      CHECK(out == first);
  }
  set_num_threads(1);
}
