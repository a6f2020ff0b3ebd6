// Conv2d with Groups{g} (torch's groups=): grouped convolutions through the dense kernels per
// group (layers/detail/grouped_conv2d.hpp), and the depthwise case through DepthwiseConv2d's.
#include <doctest/doctest.h>

#include "support/layer_harness.hpp"
#include "support/thread_independence.hpp"

using namespace cohort;
using namespace cohort::test;

// Shapes and tensors at compile time, as torch lays them out: weight (Out, In / groups, K, K).
using GroupedK3 = Conv2d<4, 6, 3, 1, 1, Groups{2}>;
static_assert(GroupedK3::groups == 2 && GroupedK3::has_bias && !GroupedK3::depthwise);
static_assert(std::is_same_v<GroupedK3::bind<Shape<4, 7, 6>>::output_shape, Shape<6, 7, 6>>);
static_assert(GroupedK3::bind<Shape<4, 7, 6>>::parameters[0].dims == std::array<std::size_t, 4>{6, 2, 3, 3});
static_assert(GroupedK3::bind<Shape<4, 7, 6>>::parameters[0].fan_in == 2 * 3 * 3); // torch: weight.size(1) * K * K
static_assert(Network<single_layer_net<Shape<4, 7, 6>, GroupedK3>>::parameter_count == 6 * 2 * 9 + 6);
static_assert(Network<single_layer_net<Shape<32, 8, 8>, Conv2d<32, 64, 1, 1, 0, Groups{8}, false>>>::parameter_count ==
              64 * 4);
static_assert(
    std::is_same_v<Conv2d<4, 8, 3, 2, 1, Groups{2}, false>::bind<Shape<4, 9, 8>>::output_shape, Shape<8, 5, 4>>);
// Options in either order, the bias flag alone as before; groups = in = out is the depthwise case.
static_assert(!Conv2d<4, 8, 3, 1, 1, false, Groups{2}>::has_bias &&
              Conv2d<4, 8, 3, 1, 1, false, Groups{2}>::groups == 2);
static_assert(Conv2d<4, 8, 3, 1, 1, false>::groups == 1 && Conv2d<4, 8, 3>::groups == 1);
static_assert(Conv2d<4, 4, 3, 1, 1, Groups{4}>::depthwise && !Conv2d<4, 8, 3, 1, 1, Groups{4}>::depthwise);
static_assert(Conv2d<4, 4, 3, 1, 1, Groups{4}>::bind<Shape<4, 6, 6>>::parameters[0].dims ==
              DepthwiseConv2d<4, 3, 1, 1>::bind<Shape<4, 6, 6>>::parameters[0].dims);

TEST_CASE("Conv2d groups: the signature spells the options canonically") {
  CHECK(GroupedK3::signature() == "Conv2d<4,6,3,1,1,Groups{2}>");
  CHECK(Conv2d<4, 8, 3, 2, 1, false, Groups{2}>::signature() == "Conv2d<4,8,3,2,1,Groups{2},false>");
  CHECK(Conv2d<4, 8, 3, 2, 1, Groups{2}, false>::signature() == "Conv2d<4,8,3,2,1,Groups{2},false>");
  CHECK(Conv2d<4, 8, 3, 2, 1, Groups{1}>::signature() == "Conv2d<4,8,3,2,1>"); // groups=1 is the dense layer
}

TEST_CASE("Conv2d groups: matches PyTorch's Conv2d(groups=g) forward, backward and 3 SGD steps") {
  check_layer_fixture<GroupedK3, Shape<4, 7, 6>>("layer_conv2d_g2_k3p1");
  check_layer_fixture<Conv2d<4, 8, 3, 2, 1, Groups{2}, false>, Shape<4, 9, 8>>("layer_conv2d_g2_k3s2p1_nobias");
  check_layer_fixture<Conv2d<6, 9, 1, 1, 0, Groups{3}, false>, Shape<6, 5, 5>>("layer_conv2d_g3_k1_nobias");
  check_layer_fixture<Conv2d<4, 8, 3, 1, 1, Groups{4}>, Shape<4, 6, 6>>("layer_conv2d_g4_multiplier");
  check_layer_fixture<Conv2d<4, 4, 3, 2, 1, Groups{4}>, Shape<4, 7, 7>>("layer_conv2d_g4_depthwise");
  check_layer_fixture<Conv2d<32, 32, 3, 1, 1, Groups{2}, false>, Shape<32, 8, 8>>("layer_conv2d_g2_wide");
}

TEST_CASE("Conv2d groups: gradients match finite differences (two groups, a channel multiplier, depthwise)") {
  gradcheck_layer<Conv2d<4, 6, 3, 2, 1, Groups{2}>, Shape<4, 7, 6>>(2, Mode::train);
  gradcheck_layer<Conv2d<2, 4, 3, 1, 1, Groups{2}, false>, Shape<2, 5, 6>>(2, Mode::train);
  gradcheck_layer<Conv2d<3, 3, 3, 1, 1, Groups{3}>, Shape<3, 5, 5>>(2, Mode::train);
}

TEST_CASE("Conv2d groups: groups = channels is DepthwiseConv2d, bit for bit") {
  using In = Shape<6, 9, 8>;
  Network<single_layer_net<In, Conv2d<6, 6, 3, 2, 1, Groups{6}, false>>> conv(4);
  Network<single_layer_net<In, DepthwiseConv2d<6, 3, 2, 1, false>>> depthwise(9);
  {
    const auto& from = conv.parameters().values;
    auto& to = depthwise.parameters().values;
    REQUIRE(to.size() == from.size()); // the same tensors, (6, 1, 3, 3)
    std::copy(from.begin(), from.end(), to.begin());
  }
  constexpr std::size_t batch = 3;
  const auto x = pattern(batch * In::size, 37, 101), dy = pattern(batch * 6 * 5 * 4, 53, 89);
  CHECK(pass_values(conv, x, dy, batch) == pass_values(depthwise, x, dy, batch));
}

TEST_CASE("Conv2d groups: each group is the dense convolution of its channels") {
  // Group g of Conv2d<4, 6, 3, 1, 1, Groups{2}> is Conv2d<2, 3, 3, 1, 1> on input channels
  // 2g, 2g + 1 writing output channels 3g..3g + 2: the same kernels, so the same bits.
  using In = Shape<4, 7, 6>;
  using GroupIn = Shape<2, 7, 6>;
  Network<single_layer_net<In, GroupedK3>> grouped(6);
  constexpr std::size_t batch = 2, plane = 7 * 6;
  std::vector<float> x(batch * In::size);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 29) % 97) / 48.f - 1.f;
  const auto y = grouped.forward(ConstBatchView<In, float>(x.data(), batch));
  const std::vector<double> w = tensor_values(grouped, "0.weight"), b = tensor_values(grouped, "0.bias");
  for (std::size_t g = 0; g < 2; ++g) {
    CAPTURE(g);
    Network<single_layer_net<GroupIn, Conv2d<2, 3, 3, 1, 1>>> dense(1);
    auto* dw = static_cast<float*>(dense.parameters().find("0.weight").data);
    auto* db = static_cast<float*>(dense.parameters().find("0.bias").data);
    for (std::size_t i = 0; i < 3 * 2 * 9; ++i) dw[i] = float(w[g * 3 * 2 * 9 + i]);
    for (std::size_t i = 0; i < 3; ++i) db[i] = float(b[g * 3 + i]);
    std::vector<float> xg;
    for (std::size_t n = 0; n < batch; ++n)
      xg.insert(xg.end(), x.begin() + std::ptrdiff_t((n * 4 + 2 * g) * plane),
                x.begin() + std::ptrdiff_t((n * 4 + 2 * g + 2) * plane));
    const auto yg = dense.forward(ConstBatchView<GroupIn, float>(xg.data(), batch));
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t i = 0; i < 3 * plane; ++i) {
        const float got = y.data()[(n * 6 + 3 * g) * plane + i], want = yg.data()[n * 3 * plane + i];
        if (got != want) {
          CHECK_MESSAGE(got == want, "sample " << n << " element " << i);
          return;
        }
      }
  }
}

TEST_CASE("Conv2d groups: 1, 2 and 3 threads give bitwise the same output and gradients") {
  check_same_bits_on_1_2_3_threads<single_layer_net<Shape<8, 9, 9>, Conv2d<8, 16, 3, 1, 1, Groups{4}>>>(6, 5);
}
