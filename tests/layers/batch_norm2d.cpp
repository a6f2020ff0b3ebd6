#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("BatchNorm2d: training mode matches PyTorch, running statistics included") {
  check_layer_fixture<BatchNorm2d<3>, Shape<3, 5, 6>>("layer_batch_norm2d_train", Mode::train);
}
TEST_CASE("BatchNorm2d: eval mode uses the running statistics, as PyTorch") {
  check_layer_fixture<BatchNorm2d<3>, Shape<3, 5, 6>>("layer_batch_norm2d_eval", Mode::eval);
}
TEST_CASE("BatchNorm2d: gradients match finite differences in both modes") {
  gradcheck_layer<BatchNorm2d<2>, Shape<2, 3, 3>>(3, Mode::train);
  gradcheck_layer<BatchNorm2d<2>, Shape<2, 3, 3>>(3, Mode::eval);
}
TEST_CASE("BatchNorm2d: state_dict names and defaults") {
  Network<single_layer_net<Shape<4, 2, 2>, BatchNorm2d<4>>> net;
  std::vector<std::string> names;
  for (const auto& t : net.state_dict()) names.push_back(t.name);
  CHECK(names ==
        std::vector<std::string>{"0.weight", "0.bias", "0.running_mean", "0.running_var", "0.num_batches_tracked"});
  CHECK(tensor_values(net, "0.running_var") == std::vector<double>(4, 1.0));
  CHECK(net.parameters().find("0.num_batches_tracked").shape.empty()); // a 0-dim tensor, as PyTorch's
}
TEST_CASE("BatchNorm2d: a single value per channel in training is an error, not a NaN") {
  Network<single_layer_net<Shape<2, 1, 1>, BatchNorm2d<2>>> net;
  std::vector<float> x{1.f, 2.f};
  CHECK_THROWS_AS(net.forward(ConstBatchView<Shape<2, 1, 1>, float>(x.data(), 1)), ValueError);
  net.eval();
  CHECK_NOTHROW(net.forward(ConstBatchView<Shape<2, 1, 1>, float>(x.data(), 1)));
}
