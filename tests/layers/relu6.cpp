#include <doctest/doctest.h>

#include <algorithm>

#include "support/activation_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("ReLU6: matches PyTorch, including the kinks at 0 and 6 and far-out inputs") {
  check_layer_fixture<ReLU6, Shape<3, 5, 5>>("layer_relu6");
}
TEST_CASE("ReLU6: element by element, 0 gradient at both kinks, and finite differences") {
  check_activation_elementwise<ReLU6>({.f = [](double x) { return std::clamp(x, 0.0, 6.0); },
                                       .df = [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; },
                                       .kinks = {0.0, 6.0},
                                       .rtol = 0,
                                       .atol = 0});
}
