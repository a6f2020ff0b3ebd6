// GroupNorm (layers/group_norm.hpp) against torch.nn.GroupNorm: groups of several channels, one
// group (LayerNorm-like), a group per channel (InstanceNorm-like), an input of mean 5 with a
// larger eps; the same in training and evaluation; finite differences; the same bits for any
// thread count.

#include <doctest/doctest.h>

#include <cohort/layers/group_norm.hpp>

#include "support/layer_harness.hpp"
#include "support/thread_independence.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<GroupNorm<2, 6>::bind<Shape<6, 4, 5>>::output_shape, Shape<6, 4, 5>>);
static_assert(GroupNorm<2, 6>::accepts<Shape<6, 3, 3>> && !GroupNorm<2, 6>::accepts<Shape<4, 3, 3>>);
static_assert(single_layer_net<Shape<6, 4, 5>, GroupNorm<2, 6>>::parameter_count == 12);

TEST_CASE("GroupNorm: matches PyTorch (2 groups of 3, one group, one group per channel, offset input)") {
  check_layer_fixture<GroupNorm<2, 6>, Shape<6, 4, 5>>("group_norm_2x3");
  check_layer_fixture<GroupNorm<1, 4>, Shape<4, 3, 3>>("group_norm_1x4");
  check_layer_fixture<GroupNorm<4, 4>, Shape<4, 5, 3>>("group_norm_4x1");
  check_layer_fixture<GroupNorm<2, 4, 1e-3f>, Shape<4, 6, 6>>("group_norm_offset");
  // No running statistics: evaluation mode computes what training mode does.
  check_layer_fixture<GroupNorm<2, 6>, Shape<6, 4, 5>>("group_norm_2x3", Mode::eval);
}
TEST_CASE("GroupNorm: gradients match finite differences") {
  gradcheck_layer<GroupNorm<2, 4>, Shape<4, 3, 2>>(2, Mode::train);
  gradcheck_layer<GroupNorm<1, 3>, Shape<3, 2, 2>>(3, Mode::train);
  gradcheck_layer<GroupNorm<3, 3>, Shape<3, 3, 1>>(1, Mode::train); // a batch of one
}
TEST_CASE("GroupNorm: signature") { CHECK(GroupNorm<8, 32>::signature().rfind("GroupNorm<8,32,", 0) == 0); }
TEST_CASE("GroupNorm: the same bits on 1, 2 and 3 threads") {
  check_same_bits_on_1_2_3_threads<single_layer_net<Shape<8, 9, 9>, GroupNorm<4, 8>>>(6, 5);
}
