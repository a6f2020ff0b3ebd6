#include <doctest/doctest.h>

#include <algorithm>

#include "support/activation_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("Hardswish: matches PyTorch, including its gradient at the kinks -3 and 3") {
  check_layer_fixture<Hardswish, Shape<3, 5, 5>>("layer_hardswish");
}
TEST_CASE("Hardswish: element by element, torch's gradient at the kinks (0 at -3, 1 at 3), and finite differences") {
  check_activation_elementwise<Hardswish>({.f = [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; },
                                           .df = [](double x) { return x <= -3 ? 0.0
                                                                       : x < 3 ? x / 3 + 0.5
                                                                               : 1.0; },
                                           .kinks = {-3.0, 3.0},
                                           .rtol = 3e-7,
                                           .atol = 1e-7});
}
