#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(LeakyReLU<>::negative_slope == 0.01f); // PyTorch's default
static_assert(std::is_same_v<LeakyReLU<0.2f>::bind<Shape<3, 4, 4>>::output_shape, Shape<3, 4, 4>>);

TEST_CASE("LeakyReLU: matches PyTorch with the default slope 0.01, including zero inputs") {
  check_layer_fixture<LeakyReLU<>, Shape<3, 5, 5>>("layer_leaky_relu");
}
TEST_CASE("LeakyReLU: matches PyTorch with slope 0.2") {
  check_layer_fixture<LeakyReLU<0.2f>, Shape<10>>("layer_leaky_relu_0p2");
}
TEST_CASE("LeakyReLU: gradients match finite differences") {
  gradcheck_layer<LeakyReLU<>, Shape<2, 3, 4>>(2, Mode::train);
  gradcheck_layer<LeakyReLU<0.3f>, Shape<7>>(3, Mode::train);
}
TEST_CASE("LeakyReLU: the slope scales negative inputs and their gradient, and is the gradient at 0") {
  const std::vector<float> x{-2.f, 0.f, 3.f, -0.5f};
  Network<single_layer_net<Shape<4>, LeakyReLU<0.25f>>> net;
  const auto y = net.forward(ConstBatchView<Shape<4>, float>(x.data(), 1));
  CHECK(std::vector<float>(y.data(), y.data() + 4) == std::vector<float>{-0.5f, 0.f, 3.f, -0.125f});
  const std::vector<float> dy{1.f, 1.f, 1.f, 2.f};
  const auto dx = net.backward(ConstBatchView<Shape<4>, float>(dy.data(), 1), {.input_grad = true});
  CHECK(std::vector<float>(dx.data(), dx.data() + 4) == std::vector<float>{0.25f, 0.25f, 1.f, 0.5f});
  CHECK(LeakyReLU<0.25f>::signature() == "LeakyReLU<0.250000>");
  CHECK(LeakyReLU<0.25f>::signature() != LeakyReLU<>::signature());
}
