#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("ReLU: matches PyTorch, including zero inputs") { check_layer_fixture<ReLU, Shape<3, 5, 5>>("layer_relu"); }
TEST_CASE("ReLU: gradients match finite differences") { gradcheck_layer<ReLU, Shape<2, 3, 4>>(2, Mode::train); }
