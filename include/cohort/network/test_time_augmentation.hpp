#pragma once
/// \file
/// Test-time augmentation: a network's scores averaged over the image and its horizontal mirror,
/// as airbench and hlb-CIFAR10 evaluate (`0.5 * net(x) + 0.5 * net(x.flip(-1))`). For a network
/// that predicts per pixel, the mirrored pass's (C, H, W) scores are mirrored back first
/// (`0.5 * net(x) + 0.5 * net(x.flip(-1)).flip(-1)`), so each pixel averages its own two scores.
/// Used by predict (network/predict.hpp) and by the Trainer's evaluation
/// (TrainerOptions::test_time_augmentation), with which accuracy and loss are those of the
/// averaged scores.
/// Example (compiled: tests/docs/headers.cpp, "network/test_time_augmentation"):
///
///     auto p = cohort::predict(net, images, cohort::Prediction::scores, 256, cohort::TestTimeAugmentation::flip);
///
/// The average is computed in float as torch computes it on float scores (two exact halvings,
/// one rounded sum) and, for 16-bit scores, rounded once to the storage type, as torch's bf16
/// arithmetic under autocast rounds the sum. The mirror is only meaningful for images: a
/// network whose input is not (C, H, W) is refused with a ValueError.

#include <cstddef>
#include <string_view>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"

namespace cohort {

/// Which views of each image evaluation averages the scores of.
enum class TestTimeAugmentation {
  none, ///< the image as it is
  flip  ///< the image and its horizontal mirror (the last axis reversed), scores averaged
};

constexpr std::string_view to_string(TestTimeAugmentation t) noexcept {
  return t == TestTimeAugmentation::flip ? "flip" : "none";
}

namespace detail {

/// ValueError unless `t` can run on inputs of shape In (images: rank 3). `who` names the caller.
template <ShapeType In>
void check_test_time_augmentation(TestTimeAugmentation t, const char* who) {
  if (t == TestTimeAugmentation::none) return;
  if constexpr (In::rank != 3)
    throw ValueError(concat(who, ": test-time augmentation 'flip' mirrors images (C, H, W) and the network's input is ",
                            In::str(), ": expected TestTimeAugmentation::none"));
}

/// `out` = `x` with the last axis of each sample of shape S (rank 3) reversed: `batch` samples.
template <ShapeType S, class T>
void mirror_width(const T* x, T* out, std::size_t batch) {
  static_assert(S::rank == 3, "mirror_width: (C, H, W) samples");
  constexpr std::size_t w = S::extents[2], rows = S::size / w;
  for (std::size_t r = 0; r < batch * rows; ++r) {
    const T* from = x + r * w;
    T* to = out + r * w;
    for (std::size_t i = 0; i < w; ++i) to[i] = from[w - 1 - i];
  }
}

/// acc[i] = 0.5 * acc[i] + 0.5 * mirrored[j] over `batch` samples of shape Out, j = i for a
/// vector of scores, the mirrored position for (C, H, W) scores (the mirrored pass mirrored back).
template <ShapeType Out>
void average_mirrored_scores(float* acc, const float* mirrored, std::size_t batch) {
  if constexpr (Out::rank == 3) {
    constexpr std::size_t w = Out::extents[2], rows = Out::size / w;
    for (std::size_t r = 0; r < batch * rows; ++r) {
      float* a = acc + r * w;
      const float* m = mirrored + r * w;
      for (std::size_t i = 0; i < w; ++i) a[i] = 0.5f * a[i] + 0.5f * m[w - 1 - i];
    }
  } else {
    for (std::size_t i = 0; i < batch * Out::size; ++i) acc[i] = 0.5f * acc[i] + 0.5f * mirrored[i];
  }
}

} // namespace detail
} // namespace cohort
