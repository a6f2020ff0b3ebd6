#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<Linear<12, 7>::bind<Shape<12>>::output_shape, Shape<7>>);
static_assert(Linear<12, 7>::accepts<Shape<12>> && !Linear<12, 7>::accepts<Shape<3, 2, 2>>);

TEST_CASE("Linear: matches PyTorch") { check_layer_fixture<Linear<12, 7>, Shape<12>>("layer_linear"); }
TEST_CASE("Linear: gradients match finite differences") { gradcheck_layer<Linear<9, 4>, Shape<9>>(3, Mode::train); }
