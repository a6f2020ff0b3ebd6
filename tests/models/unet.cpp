// U-Nets (models/unet.hpp): shapes and parameter counts against the PyTorch twin
// (cohort_modules.unet), its state_dict names, and two nested levels with their encoder and
// decoder convolutions against PyTorch (forward, backward, statistics, 3 SGD steps) and finite
// differences.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <cohort/models/unet.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

// sum(p.numel() for p in cohort_modules.unet(...).parameters()):
static_assert(models::UNet<Shape<1, 28, 28>, 11>::parameter_count == 118'475); // unet(1, 11, 16, 2)
static_assert(models::UNet<Shape<3, 64, 64>, 2, 32, 4>::parameter_count == 7'849'634);
static_assert(models::UNet<Shape<1, 8, 8>, 3, 4, 2>::parameter_count == 7'555);
static_assert(models::UNet<Shape<1, 8, 8>, 3, 8, 2, models::UNetUpsampling::transposed,
                           models::UNetNorm::group>::parameter_count ==
              34'963); // unet(1, 3, 8, 2, "transposed", "group")
static_assert(models::UNet<Shape<1, 28, 28>, 11, 16, 2, models::UNetUpsampling::transposed>::parameter_count ==
              139'051);
static_assert(models::UNet<Shape<1, 28, 28>, 11, 16, 2, models::UNetUpsampling::bilinear,
                           models::UNetNorm::group>::parameter_count == 118'475);
static_assert(std::is_same_v<models::UNet<Shape<1, 28, 28>, 11>::output_shape, Shape<11, 28, 28>>);
static_assert(std::is_same_v<models::UNet<Shape<3, 64, 48>, 2, 8, 4>::output_shape, Shape<2, 64, 48>>);

TEST_CASE("UNet: two nested levels (encoder, bottom, decoder convolutions) match PyTorch's twin") {
  check_layer_fixture<models::UNetLevel<4, 2>, Shape<4, 8, 8>>("block_unet_level_c4_d2");
}
TEST_CASE("UNet: the paper's levels (transposed up-convolutions, GroupNorm) match PyTorch's twin") {
  check_layer_fixture<models::UNetLevel<8, 2, models::UNetUpsampling::transposed, models::UNetNorm::group>,
                      Shape<8, 8, 8>>("block_unet_level_c8_d2_transposed_group");
}
TEST_CASE("UNet: gradients of its levels match finite differences") {
  gradcheck_layer<models::UNetLevel<2, 1>, Shape<2, 4, 4>>(2, Mode::train);
  gradcheck_layer<models::UNetLevel<1, 2>, Shape<1, 4, 4>>(2, Mode::eval);
  gradcheck_layer<models::UNetLevel<2, 1, models::UNetUpsampling::transposed, models::UNetNorm::group>, Shape<2, 4, 4>>(
      2, Mode::train);
}
TEST_CASE("UNet: tensors are named as cohort_modules.unet names them") {
  Network<models::UNet<Shape<1, 8, 8>, 3, 4, 2>> net(0);
  std::vector<std::string> names;
  for (const TensorRef& t : net.state_dict()) names.push_back(t.name);
  REQUIRE(names.size() == 12 * 5 + 2); // 10 convolutions without bias, 10 BatchNorms (5 tensors), the head
  // First and last tensors of torch's state_dict, and the bottom level's first convolution.
  CHECK(names.front() == "0.weight");
  CHECK(names[1] == "1.weight");
  CHECK(std::find(names.begin(), names.end(), "6.second.7.second.1.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "6.second.12.running_var") != names.end());
  CHECK(names[names.size() - 2] == "13.weight");
  CHECK(names.back() == "13.bias");
}
