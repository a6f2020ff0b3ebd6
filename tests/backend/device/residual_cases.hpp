#pragma once
// Residual blocks on the device backend `Dev` (chosen by the including file): the PyTorch
// fixtures the CPU blocks pass (tests/layers/residual.cpp), then a small residual network against
// the CPU backend with its ReLUs fused into the sums and not.
#include <doctest/doctest.h>

#include <cohort/layers/residual.hpp>
#include <cohort/models/resnet.hpp>

#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using DevBasic = Residual<Branch<Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4>, ReLU, Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4>>>;
using DevProjection =
    Residual<Branch<Conv2d<4, 8, 3, 2, 1>, BatchNorm2d<8>, ReLU, Conv2d<8, 8, 3, 1, 1>, BatchNorm2d<8>>,
             Branch<Conv2d<4, 8, 1, 2, 0>, BatchNorm2d<8>>>;
using DevNested = Residual<Branch<Residual<Branch<Conv2d<3, 3, 3, 1, 1>, ReLU>>, Conv2d<3, 3, 1>>>;
} // namespace

TEST_CASE("device residual: identity, projection (train and eval) and nested blocks match PyTorch") {
  check_layer_fixture_on<Dev, DevBasic, Shape<4, 6, 6>>("block_residual_identity");
  check_layer_fixture_on<Dev, DevProjection, Shape<4, 7, 7>>("block_residual_projection");
  check_layer_fixture_on<Dev, DevProjection, Shape<4, 7, 7>>("block_residual_projection_eval", Mode::eval);
  check_layer_fixture_on<Dev, DevNested, Shape<3, 5, 5>>("block_residual_nested");
}
TEST_CASE("device residual: the ResNet blocks (basic, bottleneck with identity and projection) match PyTorch") {
  check_layer_fixture_on<Dev, models::BasicBlock<4, 8, 2>, Shape<4, 7, 7>>("block_basic_projection");
  check_layer_fixture_on<Dev, models::Bottleneck<16, 4>, Shape<16, 5, 5>>("block_bottleneck_identity");
  check_layer_fixture_on<Dev, models::Bottleneck<8, 4, 2>, Shape<8, 7, 6>>("block_bottleneck_projection");
}

#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
TEST_CASE("device vs CPU: a residual network, its ReLUs fused into the sums and not") {
  using Net = Sequential<Input<4, 7, 7>, DevProjection, ReLU, Residual<Branch<Conv2d<8, 8, 3, 1, 1>, BatchNorm2d<8>>>,
                         ReLU, Flatten, Linear<128, 5>>;
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    check_against_cpu<Net, Dev>({.batch = 3, .fusion = fusion, .steps = 2});
  }
}
#endif
