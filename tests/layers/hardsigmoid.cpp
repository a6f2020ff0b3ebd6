#include <doctest/doctest.h>

#include <algorithm>

#include "support/activation_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("Hardsigmoid: matches PyTorch, including the kinks at -3 and 3 and far-out inputs") {
  check_layer_fixture<Hardsigmoid, Shape<3, 5, 5>>("layer_hardsigmoid");
}
TEST_CASE("Hardsigmoid: element by element, 0 gradient at both kinks, and finite differences") {
  check_activation_elementwise<Hardsigmoid>({.f = [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); },
                                             .df = [](double x) { return x > -3 && x < 3 ? 1.0 / 6 : 0.0; },
                                             .kinks = {-3.0, 3.0},
                                             .rtol = 2e-7,
                                             .atol = 1e-7});
}
