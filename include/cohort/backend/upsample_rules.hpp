#pragma once
/// \file
/// Where an upsampled pixel reads from: PyTorch's source-index rules of `nn.Upsample` with an
/// integer scale factor (nearest; bilinear with align_corners false or true), shared by the CPU
/// and the device kernels so that both compute the same indices and weights.
///
/// Bilinear, per axis, as torch's area_pixel_compute_source_index and guard_index_and_lambda
/// (in float, torch's opmath type for float and 16-bit tensors):
///   align_corners = false: real = (o + 0.5) / Scale - 0.5, clamped below at 0;
///   align_corners = true:  real = o * (In - 1) / (Out - 1);
///   i0 = min(floor(real), In - 1), i1 = i0 + (i0 + 1 < In), l1 = clamp(real - i0, 0, 1), l0 = 1 - l1.
/// Nearest: i = o / Scale (torch's floor(o * (1 / Scale)), equal for integer scales below 2^20).

#include <cstddef>
#include <cstdint>

#include "cohort/core/macros.hpp"

namespace cohort {

/// How Upsample interpolates (torch's mode="nearest" / mode="bilinear").
enum class UpsampleMode : std::uint8_t { nearest, bilinear };

/// Geometry of one Upsample layer: (C, H, W) -> (C, H * Scale, W * Scale), all compile-time.
template <std::size_t C, std::size_t H, std::size_t W, std::size_t Scale, UpsampleMode Mode, bool AlignCorners>
struct UpsampleGeometry {
  static constexpr std::size_t channels = C, in_h = H, in_w = W, scale = Scale;
  static constexpr UpsampleMode mode = Mode;
  static constexpr bool align_corners = AlignCorners;
  static constexpr std::size_t out_h = H * Scale, out_w = W * Scale;
  static constexpr std::size_t in_plane = H * W, out_plane = out_h * out_w;
  static constexpr std::size_t in_size = C * in_plane, out_size = C * out_plane; // per sample
};

namespace detail {

/// One output coordinate's two source coordinates and their weights along one axis.
struct LinearTap {
  std::size_t i0 = 0, i1 = 0;
  float l0 = 1, l1 = 0;
};

/// The tap of output coordinate o on an axis of In inputs and In * Scale outputs.
template <std::size_t In, std::size_t Scale, bool AlignCorners>
COHORT_HOST_DEVICE constexpr LinearTap linear_tap(std::size_t o) {
  constexpr std::size_t out = In * Scale;
  float real = 0;
  if constexpr (AlignCorners) {
    // torch: static_cast<float>(In - 1) / (Out - 1), and 0 for a single output.
    constexpr float ratio = out > 1 ? float(In - 1) / float(out - 1) : 0.0f;
    real = ratio * float(o);
  } else {
    constexpr float ratio = float(1.0 / double(Scale)); // torch: (float)(1.0 / scale_factor)
    real = ratio * (float(o) + 0.5f) - 0.5f;
    if (real < 0) real = 0;
  }
  // real >= 0: truncation is floor.
  std::size_t i0 = std::size_t(real);
  if (i0 > In - 1) i0 = In - 1;
  float l1 = real - float(i0);
  l1 = l1 < 0 ? 0.0f : l1 > 1 ? 1.0f : l1;
  // (i0 + 1 < In rather than i0 < In - 1: nvcc warns of an unsigned compare with 0 when In is 1)
  return {i0, i0 + (i0 + 1 < In ? 1 : 0), 1.0f - l1, l1};
}

/// Output coordinates [lo, hi) on an axis that may read input coordinate i (a superset: the
/// callers test each tap). align_corners = false reads i from o < (i + 1.5) * Scale; true from
/// o < (i + 1) * (Out - 1) / (In - 1), and both from o >= (i - 1) * Scale - 1 at the earliest.
template <std::size_t In, std::size_t Scale, bool AlignCorners>
struct LinearReaders {
  std::size_t lo, hi;
  COHORT_HOST_DEVICE constexpr explicit LinearReaders(std::size_t i) {
    constexpr std::size_t out = In * Scale;
    lo = i >= 1 && (i - 1) * Scale >= 1 ? (i - 1) * Scale - 1 : 0;
    std::size_t h = out;
    if constexpr (In > 1) {
      if constexpr (AlignCorners)
        h = (i + 1) * (out - 1) / (In - 1) + 2;
      else
        h = (i + 2) * Scale + 2;
    }
    hi = h < out ? h : out;
  }
};

} // namespace detail
} // namespace cohort
