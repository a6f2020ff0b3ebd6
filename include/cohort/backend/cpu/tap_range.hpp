#pragma once
/// \file
/// Which output positions of a sliding window read inside the input, for the im2col copies and
/// the pooling loops.
///
///     const cpu::TapRange r = cpu::tap_range(kw, in_w, out_w, stride, pad);  // ow in [r.first, r.last)

#include <algorithm>
#include <cstddef>

namespace cohort::cpu {

/// Output positions [first, last) whose window tap `k` lands inside an input extent `in` (the
/// rest fall on padding). Computing the range up front keeps the copy loops branch-free; it
/// also sidesteps a GCC 12 -O3 loop-unswitching miscompilation of the per-element test.
struct TapRange {
  std::size_t first, last;
};
constexpr TapRange tap_range(std::size_t k, std::size_t in, std::size_t out, std::size_t stride,
                             std::size_t pad) noexcept {
  const std::size_t first = k >= pad ? 0 : (pad - k + stride - 1) / stride;
  const std::size_t last = in + pad > k ? std::min(out, (in + pad - k - 1) / stride + 1) : 0;
  return {std::min(first, last), last};
}

} // namespace cohort::cpu
