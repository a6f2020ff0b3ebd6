#pragma once
// A learnable toy segmentation set shared by the dense Trainer tests (tests/train/dense_trainer.cpp,
// tests/mpi/ddp_check.cpp): 1x8x8 images of noise over a bright band of rows; a pixel's class is
// 1 in the band, 2 where the noise is dark, 0 elsewhere. Every third sample has its first six
// rows marked ignore_index, so the shards of a batch count different numbers of pixels.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "cohort/data/dense_dataset.hpp"

namespace cohort::test {

inline MaskDataset<Shape<1, 8, 8>> mask_bands(std::size_t n, unsigned seed, std::int32_t ignore = -100) {
  std::vector<float> x(n * 64);
  std::vector<std::int32_t> y(n * 64);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t band = g() % 8;
    for (std::size_t p = 0; p < 64; ++p) {
      const bool in_band = p / 8 == band;
      const float v = u(g);
      x[i * 64 + p] = v + (in_band ? 1.5f : 0.f);
      y[i * 64 + p] = in_band ? 1 : v < -0.4f ? 2 : 0;
      if (i % 3 == 0 && p < 48) y[i * 64 + p] = ignore;
    }
  }
  return MaskDataset<Shape<1, 8, 8>>::copy_of(x, y, 3, ignore);
}

} // namespace cohort::test
