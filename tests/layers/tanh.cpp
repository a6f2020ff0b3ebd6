#include <doctest/doctest.h>

#include <cmath>

#include "support/activation_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("Tanh: matches PyTorch, including 0 and |x| up to 100") {
  check_layer_fixture<Tanh, Shape<3, 5, 5>>("layer_tanh");
}
TEST_CASE(
    "Tanh: element by element against double precision (both branches of the polynomial), and finite differences") {
  // The gradient comes from the float output (1 - y^2, as torch's): absolute error near |y| = 1.
  check_activation_elementwise<Tanh>({.f = [](double x) { return std::tanh(x); },
                                      .df =
                                          [](double x) {
                                            const double t = std::tanh(x);
                                            return 1 - t * t;
                                          },
                                      .kinks = {},
                                      .rtol = 1e-6,
                                      .atol = 2e-7});
}
