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

// Conv2d<..., false>: PyTorch's bias=False (a convolution before BatchNorm), one fixture per CPU
// path: im2col (stride 2, the 1x1 stride-2 projection shortcut), the direct kernel with its
// tiled and one-channel weight gradients, and 1x1 kernels.
static_assert(!Conv2d<3, 6, 3, 2, 1, false>::has_bias && Conv2d<3, 6, 3>::has_bias);
static_assert(Conv2d<3, 6, 3, 2, 1, false>::bind<Shape<3, 9, 8>>::parameters.size() == 1);
static_assert(Sequential<Input<3, 9, 8>, Conv2d<3, 6, 3, 2, 1, false>>::parameter_count == 6 * 3 * 3 * 3);
static_assert(std::is_same_v<Conv2d<4, 8, 1, 2, 0, false>::bind<Shape<4, 7, 6>>::output_shape, Shape<8, 4, 3>>);

TEST_CASE("Conv2d without bias: matches PyTorch (bias=False), k3 stride 2 padding 1") {
  check_layer_fixture<Conv2d<3, 6, 3, 2, 1, false>, Shape<3, 9, 8>>("layer_conv2d_nobias_k3s2p1");
}
TEST_CASE("Conv2d without bias: matches PyTorch (bias=False), 1x1 stride 2") {
  check_layer_fixture<Conv2d<4, 8, 1, 2, 0, false>, Shape<4, 7, 6>>("layer_conv2d_nobias_k1s2");
}
TEST_CASE("Conv2d without bias: matches PyTorch (bias=False), direct kernel k3 padding 1, k1, one channel") {
  check_layer_fixture<Conv2d<3, 5, 3, 1, 1, false>, Shape<3, 7, 6>>("layer_conv2d_nobias_k3p1");
  check_layer_fixture<Conv2d<4, 6, 1, 1, 0, false>, Shape<4, 5, 5>>("layer_conv2d_nobias_k1");
  check_layer_fixture<Conv2d<1, 4, 3, 1, 0, false>, Shape<1, 8, 8>>("layer_conv2d_nobias_1ch");
}
TEST_CASE("Conv2d without bias: gradients match finite differences") {
  gradcheck_layer<Conv2d<2, 3, 3, 1, 1, false>, Shape<2, 6, 5>>(2, Mode::train);
  gradcheck_layer<Conv2d<2, 3, 3, 2, 1, false>, Shape<2, 7, 6>>(2, Mode::train);
}
TEST_CASE("Conv2d without bias: no bias tensor, and a signature of its own") {
  Network<single_layer_net<Shape<3, 6, 6>, Conv2d<3, 4, 3, 1, 1, false>>> net(2);
  std::vector<std::string> names;
  for (const auto& t : net.state_dict()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"0.weight"});
  CHECK(Conv2d<3, 4, 3, 1, 1, false>::signature() == "Conv2d<3,4,3,1,1,false>");
  CHECK(Conv2d<3, 4, 3, 1, 1>::signature() == "Conv2d<3,4,3,1,1>"); // unchanged for existing networks
  CHECK(Conv2d<3, 4, 3, 1, 1, true>::signature() == Conv2d<3, 4, 3, 1, 1>::signature());
}
TEST_CASE("Conv2d without bias: the output is the biased convolution's minus the bias, on every path") {
  // The same weights with and without a bias: the difference is exactly the bias on the direct
  // (stride 1) and im2col (stride 2) paths, fused with a ReLU or not; with a zero bias they agree
  // bit for bit, so the bias-free kernels add nothing of their own.
  const auto check = [](auto with_bias, auto without_bias, auto in_shape) {
    using With = decltype(with_bias);
    using Without = decltype(without_bias);
    using In = decltype(in_shape);
    Network<single_layer_net<In, With>> a(7);
    Network<single_layer_net<In, Without>> b(7);
    const auto w = tensor_values(a, "0.weight");
    auto* bw = static_cast<float*>(b.parameters().find("0.weight").data);
    for (std::size_t i = 0; i < w.size(); ++i) bw[i] = float(w[i]);
    auto* bias = static_cast<float*>(a.parameters().find("0.bias").data);
    std::fill(bias, bias + a.parameters().find("0.bias").size, 0.f);
    std::vector<float> x(3 * In::size);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(i)));
    const auto ya = a.forward(ConstBatchView<In, float>(x.data(), 3));
    const std::vector<float> first(ya.data(), ya.data() + ya.size());
    const auto yb = b.forward(ConstBatchView<In, float>(x.data(), 3));
    CHECK(std::vector<float>(yb.data(), yb.data() + yb.size()) == first);
    using Out = typename single_layer_net<In, With>::output_shape;
    std::vector<float> dy(3 * Out::size);
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(std::cos(0.11 * double(i)));
    const auto dxa = a.backward(ConstBatchView<Out, float>(dy.data(), 3), {.input_grad = true});
    const std::vector<float> dx_first(dxa.data(), dxa.data() + dxa.size());
    const auto dxb = b.backward(ConstBatchView<Out, float>(dy.data(), 3), {.input_grad = true});
    CHECK(std::vector<float>(dxb.data(), dxb.data() + dxb.size()) == dx_first);
    const auto ga = gradient_of(a, "0.weight");
    const auto gb = gradient_of(b, "0.weight");
    CHECK(std::vector<float>(gb.begin(), gb.end()) == std::vector<float>(ga.begin(), ga.end()));
  };
  check(Conv2d<3, 8, 3, 1, 1>{}, Conv2d<3, 8, 3, 1, 1, false>{}, Shape<3, 9, 7>{});
  check(Conv2d<1, 8, 3>{}, Conv2d<1, 8, 3, 1, 0, false>{}, Shape<1, 9, 9>{});
  check(Conv2d<3, 8, 3, 2, 1>{}, Conv2d<3, 8, 3, 2, 1, false>{}, Shape<3, 9, 7>{});
}
