#include <doctest/doctest.h>

#include <cmath>

#include "support/activation_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("Sigmoid: matches PyTorch, including 0 and |x| up to 100") {
  check_layer_fixture<Sigmoid, Shape<3, 5, 5>>("layer_sigmoid");
}
TEST_CASE("Sigmoid: element by element against double precision, and finite differences") {
  // The gradient is taken from the float output, as torch's: (1 - y) y, whose rounding near
  // y = 1 is absolute (about 6e-8), hence the absolute term.
  check_activation_elementwise<Sigmoid>({.f = [](double x) { return 1 / (1 + std::exp(-x)); },
                                         .df =
                                             [](double x) {
                                               const double s = 1 / (1 + std::exp(-x));
                                               return s * (1 - s);
                                             },
                                         .kinks = {},
                                         .rtol = 1e-6,
                                         .atol = 1e-7});
}
