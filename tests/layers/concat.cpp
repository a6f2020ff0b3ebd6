// Concat blocks (layers/concat.hpp) against PyTorch's cohort_modules.Concat: two branches with
// BatchNorm, a U-Net level (identity beside pool-conv-upsample) and two nested levels; finite
// differences; names and layout.

#include <doctest/doctest.h>

#include <cohort/layers/concat.hpp>
#include <cohort/layers/upsample.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Both = Concat<Branch<Conv2d<3, 4, 3, 1, 1>, ReLU>, Branch<Conv2d<3, 2, 1, 1, 0, false>, BatchNorm2d<2>>>;
using UNetLevel =
    Concat<Identity,
           Branch<MaxPool2d<2>, Conv2d<4, 6, 3, 1, 1>, BatchNorm2d<6>, ReLU, Upsample<2, UpsampleMode::bilinear>>>;
using Inner = Concat<Identity, Branch<MaxPool2d<2>, Conv2d<4, 4, 3, 1, 1>, ReLU, Upsample<2>>>;
using Nested =
    Concat<Branch<Conv2d<2, 3, 1>>, Branch<MaxPool2d<2>, Conv2d<2, 4, 3, 1, 1>, ReLU, Inner, Conv2d<8, 3, 3, 1, 1>,
                                           Upsample<2, UpsampleMode::bilinear, true>>>;
} // namespace

static_assert(std::is_same_v<single_layer_net<Shape<3, 5, 6>, Both>::output_shape, Shape<6, 5, 6>>);
static_assert(std::is_same_v<single_layer_net<Shape<4, 6, 8>, UNetLevel>::output_shape, Shape<10, 6, 8>>);
static_assert(std::is_same_v<single_layer_net<Shape<2, 8, 8>, Nested>::output_shape, Shape<6, 8, 8>>);
static_assert(
    std::is_same_v<single_layer_net<Shape<5, 2, 3>, Concat<Identity, Identity>>::output_shape, Shape<10, 2, 3>>);
static_assert(single_layer_net<Shape<3, 5, 6>, Both>::parameter_count == 3 * 4 * 9 + 4 + 3 * 2 + 2 + 2);

TEST_CASE("Concat: two branches match PyTorch's torch.cat (forward, backward, statistics, 3 SGD steps)") {
  check_layer_fixture<Both, Shape<3, 5, 6>>("block_concat_branches");
}
TEST_CASE("Concat: a U-Net level (identity beside pool, conv, upsample) and two nested levels match PyTorch") {
  check_layer_fixture<UNetLevel, Shape<4, 6, 8>>("block_concat_unet_level");
  check_layer_fixture<Nested, Shape<2, 8, 8>>("block_concat_nested");
}
TEST_CASE("Concat: gradients match finite differences (both branches, identity, nested, train and eval)") {
  gradcheck_layer<Both, Shape<3, 4, 4>>(2, Mode::train);
  gradcheck_layer<UNetLevel, Shape<4, 4, 6>>(2, Mode::train);
  gradcheck_layer<UNetLevel, Shape<4, 4, 6>>(2, Mode::eval);
  gradcheck_layer<Nested, Shape<2, 4, 4>>(2, Mode::train);
  gradcheck_layer<Concat<Identity, Identity>, Shape<2, 3, 3>>(2, Mode::train);
}
TEST_CASE("Concat: tensors are named as the PyTorch module's (first.<layer>, second.<layer>), in the block's slice") {
  Network<single_layer_net<Shape<3, 5, 6>, Both>> both(0);
  std::vector<std::string> names;
  for (const TensorRef& t : both.state_dict()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"0.first.0.weight", "0.first.0.bias", "0.second.0.weight",
                                          "0.second.1.weight", "0.second.1.bias", "0.second.1.running_mean",
                                          "0.second.1.running_var", "0.second.1.num_batches_tracked"});
  Network<single_layer_net<Shape<2, 8, 8>, Nested>> nested(0);
  names.clear();
  for (const TensorRef& t : nested.state_dict()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"0.first.0.weight", "0.first.0.bias", "0.second.1.weight", "0.second.1.bias",
                                          "0.second.3.second.1.weight", "0.second.3.second.1.bias", "0.second.4.weight",
                                          "0.second.4.bias"});
  CHECK(UNetLevel::signature() ==
        "Concat<first=identity,second=[MaxPool2d<2,2,0>,Conv2d<4,6,3,1,1>,BatchNorm2d<6,0.000010,0.100000>,"
        "ReLU,Upsample<2,bilinear>]>");
}
