#include <doctest/doctest.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

using namespace cohort;
using namespace cohort::models;

// The spelling of issue "Core", verbatim.
using ModelAIssue =
    Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU, Conv2d<16, 32, 3>, ReLU, MaxPool2d<2>, Dropout2d<0.10f>,
               Flatten, Linear<4608, 64>, ReLU, Dropout<0.25f>, Linear<64, 10>, LogSoftmax>;
static_assert(ModelAIssue::parameter_count == 300'426);
static_assert(std::is_same_v<ModelAIssue::output_shape, Shape<10>>);
static_assert(std::is_same_v<ModelA, ModelAIssue>);
static_assert(ModelA::layer_count == 12);
static_assert(NetworkDescription<ModelD>);
// Every tensor is 64-byte aligned in the flat store.
static_assert([] {
  for (const auto& e : ModelB::layout.entries)
    if (e.kind != TensorKind::counter && e.offset % tensor_alignment != 0) return false;
  return true;
}());

TEST_CASE("Sequential: state_dict names are torch.nn.Sequential's") {
  Network<ModelB> net;
  std::vector<std::string> names;
  for (const auto& t : net.state_dict()) names.push_back(t.name);
  const std::vector<std::string> torch_names{
      "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked",
      "4.weight", "4.bias", "5.weight", "5.bias", "5.running_mean", "5.running_var", "5.num_batches_tracked",
      "9.weight", "9.bias"};
  CHECK(names == torch_names);
  CHECK(net.parameters().find("9.weight").shape == std::vector<std::size_t>{10, 1568});
  CHECK_THROWS_AS(net.parameters().find("9.running_mean"), ValueError);
}

TEST_CASE("Sequential: signature names every layer and shape") {
  const std::string s = ModelC::signature();
  CHECK(s == "Sequential<Input<1x28x28>; 0:Conv2d<1,32,3,1,1>; 1:ReLU; 2:MaxPool2d<2,2,0>; 3:Flatten; "
             "4:Linear<6272,64>; 5:ReLU; 6:Linear<64,10>> -> 10");
  CHECK(ModelA::signature() != ModelAIssue::signature() + "x");
  CHECK(ModelA::signature().find("Dropout2d<0.100000>") != std::string::npos);
}

TEST_CASE("Parameters: xtensor views by compile-time and run-time name") {
  Network<ModelB> net(3);
  auto w = net.parameters().view<4, "weight">(); // Conv2d<16, 32, 5>
  static_assert(std::is_same_v<decltype(w)::shape_type, xt::fixed_shape<32, 16, 5, 5>>);
  CHECK(w.shape()[0] == 32);
  CHECK(w.shape()[3] == 5);
  auto same = net.parameters().parameter("4.weight");
  CHECK(same.shape() == std::vector<std::size_t>{32, 16, 5, 5});
  w(1, 2, 3, 4) = 0.5f;
  CHECK(same(1, 2, 3, 4) == 0.5f);
  auto rm = net.parameters().view<1, "running_mean">();
  CHECK(rm.size() == 16);
  auto nbt = net.parameters().view<1, "num_batches_tracked">();
  CHECK(nbt() == 0);
  CHECK_THROWS_AS(net.parameters().parameter("1.running_mean"), ValueError);
  CHECK(net.parameters().buffer("1.running_var")(0) == 1.f);
}
