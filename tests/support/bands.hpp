#pragma once
// A learnable toy image set shared by the trainer tests: the label (0-9) is which band of rows
// of a 28x28 image is bright.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "cohort/core/shape.hpp"

namespace cohort::test {

struct Bands {
  using shape = Shape<1, 28, 28>;
  std::vector<float> x;
  std::vector<std::int32_t> y;
  Bands(std::size_t n, unsigned seed) : x(n * 784), y(n) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(0, 0.3f);
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = std::int32_t(g() % 10);
      for (std::size_t p = 0; p < 784; ++p) x[i * 784 + p] = u(g) + ((p / 28) / 3 == std::size_t(y[i]) ? 1.f : 0.f);
    }
  }
  std::size_t size() const { return y.size(); }
  const float* image(std::size_t i) const { return x.data() + i * 784; }
  std::int32_t label(std::size_t i) const { return y[i]; }
};

} // namespace cohort::test
