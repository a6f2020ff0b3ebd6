// Residual blocks (layers/residual.hpp) against PyTorch's cohort_modules.Residual: identity and
// projection shortcuts, BatchNorm in train and eval mode, a block nested in a body; finite
// differences through blocks; the ReLU fused into the sum; names and layout.

#include <doctest/doctest.h>

#include <cohort/layers/residual.hpp>
#include <cohort/models/resnet.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Basic = Residual<Branch<Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4>, ReLU, Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4>>>;
using Projection = Residual<Branch<Conv2d<4, 8, 3, 2, 1>, BatchNorm2d<8>, ReLU, Conv2d<8, 8, 3, 1, 1>, BatchNorm2d<8>>,
                            Branch<Conv2d<4, 8, 1, 2, 0>, BatchNorm2d<8>>>;
using Nested = Residual<Branch<Residual<Branch<Conv2d<3, 3, 3, 1, 1>, ReLU>>, Conv2d<3, 3, 1>>>;
} // namespace

TEST_CASE("Residual: an identity block matches PyTorch (forward, backward, statistics, 3 SGD steps)") {
  check_layer_fixture<Basic, Shape<4, 6, 6>>("block_residual_identity");
}
TEST_CASE("Residual: a projection block (stride 2, 1x1 shortcut) matches PyTorch in train and eval mode") {
  check_layer_fixture<Projection, Shape<4, 7, 7>>("block_residual_projection");
  check_layer_fixture<Projection, Shape<4, 7, 7>>("block_residual_projection_eval", Mode::eval);
}
TEST_CASE("Residual: a block nested in a body matches PyTorch") {
  check_layer_fixture<Nested, Shape<3, 5, 5>>("block_residual_nested");
}

TEST_CASE(
    "Residual: the ResNet blocks (basic with projection, bottleneck with identity and projection) match PyTorch") {
  // models/resnet.hpp's blocks as written there, against cohort_modules.basic_block/bottleneck.
  check_layer_fixture<models::BasicBlock<4, 8, 2>, Shape<4, 7, 7>>("block_basic_projection");
  check_layer_fixture<models::Bottleneck<16, 4>, Shape<16, 5, 5>>("block_bottleneck_identity");
  check_layer_fixture<models::Bottleneck<8, 4, 2>, Shape<8, 7, 6>>("block_bottleneck_projection");
}

TEST_CASE("Residual: gradients match finite differences (identity, projection, nested, train and eval)") {
  gradcheck_layer<Basic, Shape<4, 5, 5>>(2, Mode::train);
  gradcheck_layer<Basic, Shape<4, 5, 5>>(2, Mode::eval);
  gradcheck_layer<Projection, Shape<4, 5, 5>>(2, Mode::train);
  gradcheck_layer<Nested, Shape<3, 4, 4>>(2, Mode::train);
  gradcheck_layer<models::Bottleneck<8, 2, 2>, Shape<8, 5, 4>>(2, Mode::train);
}

TEST_CASE("Residual: tensors are named as PyTorch's Residual module names them, in the block's slice") {
  using Net = Sequential<Input<4, 7, 7>, Conv2d<4, 4, 1>, Projection, ReLU, Flatten, Linear<128, 2>>;
  static_assert(Net::layout.entries.size() == 2 + (12 + 6 + 3) + 2);
  static_assert(Net::parameter_count == 20 + (4 * 8 * 9 + 8 + 16 + 8 * 8 * 9 + 8 + 16 + 32 + 8 + 16) + 258);
  Network<Net> net(1);
  std::vector<std::string> names;
  for (const auto& t : net.parameters().state_dict()) names.push_back(t.name);
  CHECK(names[2] == "1.body.0.weight");
  CHECK(std::find(names.begin(), names.end(), "1.shortcut.0.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "1.shortcut.1.running_var") != names.end());
  CHECK(std::find(names.begin(), names.end(), "1.body.4.num_batches_tracked") != names.end());
  CHECK(names.back() == "4.bias");
  CHECK(Net::signature().find("2:ReLU") != std::string::npos);
  using Same = Sequential<Input<4, 6, 6>, Basic>;
  static_assert(std::is_same_v<Same::output_shape, Shape<4, 6, 6>>);
}

TEST_CASE("Residual: a ReLU after a block is fused into the sum with bitwise the same results") {
  using Basic8 = Residual<Branch<Conv2d<8, 8, 3, 1, 1>, BatchNorm2d<8>, ReLU, Conv2d<8, 8, 3, 1, 1>>>;
  using Net = Sequential<Input<4, 7, 7>, Projection, ReLU, Basic8, ReLU, Flatten, Linear<128, 3>>;
  std::vector<float> x(5 * Net::input_shape::size), dy(5 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 23) / 11.f - 1.f;
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(i % 5) - 2.f;
  const auto run = [&](bool fusion) {
    Network<Net> net(7);
    net.executor().set_fusion(fusion);
    net.forward(ConstBatchView<Net::input_shape, float>(x.data(), 5));
    const auto dx = net.backward(ConstBatchView<Shape<3>, float>(dy.data(), 5), {.input_grad = true});
    // Fused: the ReLU reports the block's output as its own (it ran inside the block).
    CHECK((net.executor().activation(0) == net.executor().activation(1)) == fusion);
    std::vector<float> out(dx.span().begin(), dx.span().end());
    out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
    return out;
  };
  const auto fused = run(true), unfused = run(false);
  CHECK(fused == unfused);
}
