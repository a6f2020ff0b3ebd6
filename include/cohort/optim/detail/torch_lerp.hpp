#pragma once
/// \file
/// torch.lerp(self, end, weight) on float tensors as ATen's vectorised CPU kernel computes it,
/// shared by the weight average (optim/weight_average.hpp) and Lookahead (optim/lookahead.hpp).

#include <cmath>
#include <cstddef>

namespace cohort::detail {

/// self[i] = lerp(self[i], end[i], w): fma(w, end - self, self) for |w| < 0.5, else
/// fma(w - 1, end - self, end), in float (ATen's lerp_vec; its two branches keep the result
/// exact at w = 0 and w = 1).
inline void torch_lerp(float* self, const float* end, std::size_t n, float w) noexcept {
  if (std::abs(w) < 0.5f) {
    for (std::size_t i = 0; i < n; ++i) self[i] = std::fma(w, end[i] - self[i], self[i]);
  } else {
    const float c = w - 1.0f;
    for (std::size_t i = 0; i < n; ++i) self[i] = std::fma(c, end[i] - self[i], end[i]);
  }
}

} // namespace cohort::detail
