// A tour of cohort's core in one file: define a statically shaped network, run it, train it a
// few steps on synthetic data, and look at its parameters by their PyTorch names.
//
//   ./build/examples/quick_tour

#include <cstdio>
#include <random>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/cohort.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

using namespace cohort;

// Shapes are part of the type: Linear<1352, 10> must match 8 x 13 x 13 exactly, or this line
// does not compile (and the error names layer 5 and both shapes).
using Net = Sequential<Input<1, 28, 28>,                    //
                       Conv2d<1, 8, 3>, ReLU, MaxPool2d<2>, // 0..2: 8 x 13 x 13
                       Dropout2d<0.1f>, Flatten,            // 3..4
                       Linear<1352, 10>>;                   // 5
static_assert(Net::parameter_count == 8 * 9 + 8 + 1352 * 10 + 10);

int main() {
  Network<Net> net(/*seed=*/42);
  CrossEntropyLoss loss;
  Adam opt({.lr = 1e-2});

  // A toy task: the label is which tenth of the image holds the brightest pixel row.
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> noise(0.f, 0.1f);
  xt::xtensor<float, 4> images({64, 1, 28, 28});
  std::vector<std::int32_t> labels(64);
  for (std::size_t n = 0; n < 64; ++n) {
    labels[n] = std::int32_t(n % 10);
    for (std::size_t h = 0; h < 28; ++h)
      for (std::size_t w = 0; w < 28; ++w)
        images(n, 0, h, w) = noise(gen) + (h / 3 == std::size_t(labels[n]) ? 1.f : 0.f);
  }

  for (int step = 0; step <= 30; ++step) {
    auto logits = net.forward(images); // shape checked at run time: (N, 1, 28, 28)
    const double l = loss.forward(logits, labels);
    net.backward(loss.backward());
    opt.step(net);
    if (step % 10 == 0) std::printf("step %2d  loss %.4f\n", step, l);
  }

  net.eval();
  auto logits = net.forward(images).tensor(); // an xtensor adaptor, (64, 10)
  int correct = 0;
  for (std::size_t n = 0; n < 64; ++n) {
    std::size_t best = 0;
    for (std::size_t k = 1; k < 10; ++k)
      if (logits(n, k) > logits(n, best)) best = k;
    correct += int(best) == labels[n];
  }
  std::printf("training accuracy after 30 steps: %d/64\n", correct);

  for (const auto& t : net.state_dict()) std::printf("%-10s %zu values\n", t.name.c_str(), t.size);
  return correct > 48 ? 0 : 1; // the example doubles as a smoke test
}
