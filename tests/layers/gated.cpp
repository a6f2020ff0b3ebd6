// Gated blocks (layers/gated.hpp) against PyTorch's cohort_modules.Gated: squeeze-and-excitation
// with Sigmoid and with Hardsigmoid, and inside a residual body (MobileNetV3's inverted residual);
// finite differences through the product and the gate; names and layout.

#include <doctest/doctest.h>

#include <cohort/layers/gated.hpp>
#include <cohort/layers/squeeze_excitation.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using SE = SqueezeExcitation<8, 3>;
using SEv3 = SqueezeExcitation<6, 4, ReLU, Hardsigmoid>;
using InvertedSE =
    Residual<Branch<Conv2d<4, 12, 1, 1, 0, false>, BatchNorm2d<12>, Hardswish, DepthwiseConv2d<12, 3, 1, 1, false>,
                    BatchNorm2d<12>, Hardswish, SqueezeExcitation<12, 4, ReLU, Hardsigmoid>,
                    Conv2d<12, 4, 1, 1, 0, false>, BatchNorm2d<4>>>;
using SENet = single_layer_net<Shape<8, 5, 6>, SE>;
} // namespace

static_assert(std::is_same_v<SENet::output_shape, Shape<8, 5, 6>>);
static_assert(SENet::parameter_count == 8 * 3 + 3 + 3 * 8 + 8); // torchvision.ops.SqueezeExcitation(8, 3)
static_assert(!SE::accepts<Shape<8>>);                          // a gate multiplies images

TEST_CASE("Gated: squeeze-and-excitation matches PyTorch (forward, backward, 3 SGD steps)") {
  check_layer_fixture<SE, Shape<8, 5, 6>>("block_gated_se");
  check_layer_fixture<SEv3, Shape<6, 7, 7>>("block_gated_hardsigmoid");
}
TEST_CASE("Gated: inside a residual body (MobileNetV3's inverted residual with SE) matches PyTorch") {
  check_layer_fixture<InvertedSE, Shape<4, 6, 6>>("block_inverted_residual_se");
}
TEST_CASE("Gated: gradients match finite differences through the product and the gate") {
  gradcheck_layer<SE, Shape<8, 3, 4>>(2, Mode::train);
  gradcheck_layer<Gated<Branch<AdaptiveAvgPool2d<1>, Conv2d<3, 3, 1>, Tanh>>, Shape<3, 4, 4>>(2, Mode::train);
  gradcheck_layer<InvertedSE, Shape<4, 4, 4>>(2, Mode::eval);
}
TEST_CASE("Gated: tensors are named as the PyTorch module's (gate.<layer>.<name>)") {
  Network<SENet> net(0);
  std::vector<std::string> names;
  for (const TensorRef& t : net.state_dict()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"0.gate.1.weight", "0.gate.1.bias", "0.gate.3.weight", "0.gate.3.bias"});
  CHECK(SE::signature() == "Gated<gate=[AdaptiveAvgPool2d<1>,Conv2d<8,3,1,1,0>,ReLU,Conv2d<3,8,1,1,0>,Sigmoid]>");
}
