// Conan test package: one training step of a small network from the created cohort package.
// Returns 0 only when the loss before and after the step is finite.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/cohort.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

using namespace cohort;

using Net = Sequential<Input<1, 8, 8>,                      //
                       Conv2d<1, 4, 3>, ReLU, MaxPool2d<2>, // 4 x 3 x 3
                       Flatten, Linear<36, 10>, LogSoftmax>;
static_assert(Net::parameter_count == 4 * 9 + 4 + 36 * 10 + 10);

int main() {
  Network<Net> net(/*seed=*/1);
  NllLoss loss;
  Sgd opt({.lr = 0.1});

  xt::xtensor<float, 4> images({8, 1, 8, 8});
  std::vector<std::int32_t> labels(8);
  for (std::size_t n = 0; n < 8; ++n) {
    labels[n] = std::int32_t(n % 10);
    for (std::size_t i = 0; i < 64; ++i) images.data()[n * 64 + i] = float((n * 7 + i * 3) % 11) / 11.f;
  }

  const double before = loss.forward(net.forward(images), labels);
  net.backward(loss.backward());
  opt.step(net);
  const double after = loss.forward(net.forward(images), labels);

  std::printf("cohort test_package: loss %.6f -> %.6f\n", before, after);
  return std::isfinite(before) && std::isfinite(after) ? 0 : 1;
}
