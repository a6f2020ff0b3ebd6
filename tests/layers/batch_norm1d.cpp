#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(BatchNorm1d<6>::accepts<Shape<6>> && !BatchNorm1d<6>::accepts<Shape<5>>);
static_assert(!BatchNorm1d<6>::accepts<Shape<6, 1, 1>>); // an image needs Flatten first
static_assert(Sequential<Input<16>, BatchNorm1d<16>>::parameter_count == 32);

TEST_CASE("BatchNorm1d: training mode matches PyTorch, running statistics and num_batches_tracked included") {
  check_layer_fixture<BatchNorm1d<6>, Shape<6>>("layer_batch_norm1d_train", Mode::train);
}
TEST_CASE("BatchNorm1d: eval mode uses the running statistics, as PyTorch") {
  check_layer_fixture<BatchNorm1d<6>, Shape<6>>("layer_batch_norm1d_eval", Mode::eval);
}
TEST_CASE("BatchNorm1d: 150 features (split between threads) match PyTorch") {
  check_layer_fixture<BatchNorm1d<150>, Shape<150>>("layer_batch_norm1d_wide", Mode::train);
}
TEST_CASE("BatchNorm1d: gradients match finite differences in both modes") {
  gradcheck_layer<BatchNorm1d<5>, Shape<5>>(4, Mode::train);
  gradcheck_layer<BatchNorm1d<5>, Shape<5>>(4, Mode::eval);
}
TEST_CASE("BatchNorm1d: state_dict names and defaults, as torch.nn.BatchNorm1d") {
  Network<single_layer_net<Shape<4>, BatchNorm1d<4>>> net;
  std::vector<std::string> names;
  for (const auto& t : net.state_dict()) names.push_back(t.name);
  CHECK(names ==
        std::vector<std::string>{"0.weight", "0.bias", "0.running_mean", "0.running_var", "0.num_batches_tracked"});
  CHECK(tensor_values(net, "0.weight") == std::vector<double>(4, 1.0));
  CHECK(tensor_values(net, "0.running_var") == std::vector<double>(4, 1.0));
  CHECK(net.parameters().find("0.num_batches_tracked").shape.empty());
  CHECK(BatchNorm1d<4>::signature() != BatchNorm2d<4>::signature());
}
TEST_CASE("BatchNorm1d: running statistics over several steps (unbiased variance, momentum 0.1)") {
  // Two features, batch of 4: after k steps on the same batch, running_mean = (1 - 0.9^k) * mean
  // and running_var = 0.9^k + (1 - 0.9^k) * var * 4/3.
  Network<single_layer_net<Shape<2>, BatchNorm1d<2>>> net;
  const std::vector<float> x{1.f, 10.f, 2.f, 20.f, 3.f, 30.f, 6.f, 60.f};
  for (int k = 1; k <= 3; ++k) net.forward(ConstBatchView<Shape<2>, float>(x.data(), 4));
  const double keep = 0.9 * 0.9 * 0.9;
  const auto mean = tensor_values(net, "0.running_mean");
  const auto var = tensor_values(net, "0.running_var");
  CHECK(mean[0] == doctest::Approx((1 - keep) * 3.0).epsilon(1e-6));
  CHECK(mean[1] == doctest::Approx((1 - keep) * 30.0).epsilon(1e-6));
  CHECK(var[0] == doctest::Approx(keep + (1 - keep) * 14.0 / 3.0).epsilon(1e-6)); // sum of squares 14 over 3
  CHECK(var[1] == doctest::Approx(keep + (1 - keep) * 1400.0 / 3.0).epsilon(1e-6));
  CHECK(tensor_values(net, "0.num_batches_tracked")[0] == 3.0);
}
TEST_CASE("BatchNorm1d: a batch of one sample in training is an error naming the layer, not a NaN") {
  Network<single_layer_net<Shape<3>, BatchNorm1d<3>>> net;
  const std::vector<float> x{1.f, 2.f, 3.f};
  CHECK_THROWS_WITH_AS(net.forward(ConstBatchView<Shape<3>, float>(x.data(), 1)),
                       doctest::Contains("BatchNorm1d (layer 0): training needs more than 1 value per feature"),
                       ValueError);
  net.eval();
  CHECK_NOTHROW(net.forward(ConstBatchView<Shape<3>, float>(x.data(), 1)));
}
TEST_CASE("BatchNorm1d -> ReLU: the fused and unfused runs agree bit for bit") {
  using Net = Sequential<Input<12>, Linear<12, 40>, BatchNorm1d<40>, ReLU, Linear<40, 3>>;
  std::vector<float> x(6 * 12), dy(6 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * double(i)));
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = float(std::cos(0.3 * double(i)));
  const auto run = [&](bool fusion, Mode mode) {
    Network<Net> net(4);
    net.executor().set_fusion(fusion);
    mode == Mode::train ? net.train() : net.eval();
    const auto y = net.forward(ConstBatchView<Shape<12>, float>(x.data(), 6));
    std::vector<float> out(y.data(), y.data() + y.size());
    const auto dx = net.backward(ConstBatchView<Shape<3>, float>(dy.data(), 6), {.input_grad = true});
    out.insert(out.end(), dx.data(), dx.data() + dx.size());
    out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
    return out;
  };
  for (Mode mode : {Mode::train, Mode::eval}) {
    CAPTURE(int(mode));
    CHECK(run(true, mode) == run(false, mode));
  }
}
