#pragma once
/// \file
/// ReLU then 2x2 max-pool of two rows, the epilogue of every fused "... -> ReLU -> MaxPool2d<2>"
/// (the convolution's, BatchNorm2d's). The ReLU is the ReLU layer's rule (v > 0 ? v : 0) and the
/// window rule MaxPool2d's (left wins ties, then top; NaN propagates), so fused results are
/// bitwise those of the separate layers.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cohort/backend/cpu/simd.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

/// out[j] = max over the window {top[2j], top[2j+1], bottom[2j], bottom[2j+1]} of relu(.), and
/// win[j] = its position (2*down + right), for j in [0, pooled). Reads up to 2W floats past
/// 2*pooled in both rows: callers leave that much readable slack.
template <int W>
COHORT_ALWAYS_INLINE void relu_pool_rows(const float* __restrict top, const float* __restrict bottom,
                                         std::size_t pooled, float* __restrict out, std::uint8_t* __restrict win) {
  using iv = ivec<W>;
  iv even{}, odd{};
  for (int l = 0; l < W; ++l) even[l] = 2 * l, odd[l] = 2 * l + 1;
  const vec<W> zero{};
  // The larger of each horizontal pair of relu(row), with a 0/1 "right" bit per lane.
  const auto pairs = [&](const float* row, vec<W>& value, iv& right) {
    const vec<W> a = load<W>(row), b = load<W>(row + W);
    vec<W> l = __builtin_shuffle(a, b, even), r = __builtin_shuffle(a, b, odd);
    l = l > zero ? l : zero;
    r = r > zero ? r : zero;
    const iv take = (r > l) | ((r != r) & (l == l));
    value = take ? r : l;
    right = take & 1;
  };
  for (std::size_t j0 = 0; j0 < pooled; j0 += W) {
    vec<W> tv, bv;
    iv tr, br;
    pairs(top + 2 * j0, tv, tr);
    pairs(bottom + 2 * j0, bv, br);
    const iv down = (bv > tv) | ((bv != bv) & (tv == tv));
    const vec<W> best = down ? bv : tv;
    const iv which = (down & 2) | (down ? br : tr);
    float values[W];
    std::int32_t index[W];
    __builtin_memcpy(values, &best, sizeof best);
    __builtin_memcpy(index, &which, sizeof which);
    const std::size_t n = std::min<std::size_t>(W, pooled - j0);
    for (std::size_t l = 0; l < n; ++l) {
      out[j0 + l] = values[l];
      win[j0 + l] = std::uint8_t(index[l]);
    }
  }
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop
