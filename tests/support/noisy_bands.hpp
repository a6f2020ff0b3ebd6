#pragma once
// A learnable toy denoising set shared by the regression Trainer tests
// (tests/train/regression_trainer.cpp, tests/mpi/ddp_check.cpp): 1x8x8 targets of a bright band
// of rows (0.9) on a dark ground (0.1), the inputs the same with uniform noise in [-0.5, 0.5].
// With C > 1 target channels, channel c is the band image, or its negative (1 - it) for odd c:
// targets of another size than the masks' H x W. Targets lie in [0, 1], so every regression
// loss (BCEWithLogitsLoss too) takes them.

#include <cstddef>
#include <random>
#include <vector>

#include "cohort/data/dense_dataset.hpp"

namespace cohort::test {

template <std::size_t C = 1>
ImagePairDataset<Shape<1, 8, 8>, Shape<C, 8, 8>> noisy_bands(std::size_t n, unsigned seed) {
  std::vector<float> x(n * 64), t(n * C * 64);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t band = g() % 8;
    for (std::size_t p = 0; p < 64; ++p) {
      const float clean = p / 8 == band ? 0.9f : 0.1f;
      x[i * 64 + p] = clean + u(g);
      for (std::size_t c = 0; c < C; ++c) t[(i * C + c) * 64 + p] = c % 2 ? 1 - clean : clean;
    }
  }
  return ImagePairDataset<Shape<1, 8, 8>, Shape<C, 8, 8>>::copy_of(x, t);
}

} // namespace cohort::test
