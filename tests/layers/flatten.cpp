#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(std::is_same_v<Flatten::bind<Shape<32, 12, 12>>::output_shape, Shape<4608>>);

TEST_CASE("Flatten: moves no data (the output aliases the input)") {
  Network<single_layer_net<Shape<2, 3, 3>, Flatten>> net;
  std::vector<float> x(2 * 18, 1.f);
  auto y = net.forward(ConstBatchView<Shape<2, 3, 3>, float>(x.data(), 2));
  CHECK(y.data() == x.data());
}
TEST_CASE("Flatten: gradients pass through") {
  using Net = Sequential<Input<2, 3, 3>, Conv2d<2, 2, 2>, Flatten, Linear<8, 3>>;
  Network<Net, double> net(1);
  std::vector<double> x(2 * 18);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i));
  check_network_gradients(net, x, 2, Mode::train);
}
