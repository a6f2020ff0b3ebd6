#pragma once
/// \file
/// Sums of equal-length segments of a computed sequence, in double, left on the device: a few
/// for_each launches and no host synchronisation or temporary allocation (a Thrust
/// reduce_by_key copies its run count back to the host, and allocates, on every call).
///
///     device::SegmentedSum sums;                 // keeps its partial sums between calls
///     sums(ctx.policy(), channels, per_channel, term, out);   // out[s] = sum_j term(s * per_channel + j)
///
/// Each segment is cut into blocks of `terms_per_thread` consecutive terms, each summed one after
/// the other by one thread; then launches of `fan_in` partial sums per thread add those up,
/// level by level, until one sum per segment is left. The tree is fixed, so the result is the
/// same on every device system and run. Many short threads, not a few long ones: a GPU hides
/// the loads and the index arithmetic of a term only across many warps (blocks of 256 terms
/// left model B's BatchNorm sums at 4,912 threads and 65% of its GPU time, bench/gpu/).

#include <cstddef>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// partial[t] = the sum of block t % blocks of segment t / blocks (`per` terms, the last block
/// what is left).
template <class Term>
struct BlockSum {
  Term term;
  std::size_t length, blocks, per;
  double* partial;
  COHORT_HOST_DEVICE void operator()(std::size_t t) const {
    const std::size_t s = t / blocks, b = t % blocks;
    const std::size_t first = s * length + b * per, last = s * length + (b + 1 == blocks ? length : (b + 1) * per);
    double sum = 0;
    for (std::size_t j = first; j < last; ++j) sum += term(j);
    partial[t] = sum;
  }
};
/// out[t] = the sum of group t % groups of segment t / groups: `fan_in` consecutive values of its
/// `n` partial sums (the last group what is left), in order.
struct AddPartials {
  const double* partial;
  std::size_t n, groups, fan_in;
  double* out;
  COHORT_HOST_DEVICE void operator()(std::size_t t) const {
    const std::size_t s = t / groups, g = t % groups;
    const std::size_t first = s * n + g * fan_in, last = s * n + (g + 1 == groups ? n : (g + 1) * fan_in);
    double sum = 0;
    for (std::size_t j = first; j < last; ++j) sum += partial[j];
    out[t] = sum;
  }
};
constexpr std::size_t ceil_div(std::size_t a, std::size_t b) noexcept { return (a + b - 1) / b; }
} // namespace detail

class SegmentedSum {
 public:
  /// Terms one thread of the first launch adds in sequence, and partial sums one thread of each
  /// later launch adds: 78,400-term segments (model B's first BatchNorm) take 4,900 threads
  /// each, then 154, 5 and 1.
  static constexpr std::size_t terms_per_thread = 16, fan_in = 32;

  /// out[s] = sum over j < length of term(s * length + j), for s < segments (out: device memory).
  template <class Policy, class Term>
  void operator()(const Policy& policy, std::size_t segments, std::size_t length, Term term, double* out) {
    using detail::ceil_div;
    if (segments == 0) return;
    std::size_t n = length == 0 ? 1 : ceil_div(length, terms_per_thread);
    if (n == 1) {
      for_each_index(policy, segments, detail::BlockSum<Term>{term, length, 1, terms_per_thread, out});
      return;
    }
    // Both levels' buffers are sized before the first launch: resizing one while an earlier
    // launch still reads it could free memory a queued kernel uses.
    partial_[0].resize_uninitialized(segments * n); // grow with the batch, then stay
    partial_[1].resize_uninitialized(segments * ceil_div(n, fan_in));
    for_each_index(policy, segments * n, detail::BlockSum<Term>{term, length, n, terms_per_thread, partial_[0].data()});
    for (std::size_t from = 0; n > 1; from = 1 - from) {
      const std::size_t groups = ceil_div(n, fan_in);
      double* to = groups == 1 ? out : partial_[1 - from].data();
      for_each_index(policy, segments * groups, detail::AddPartials{partial_[from].data(), n, groups, fan_in, to});
      n = groups;
    }
  }

 private:
  DeviceBuffer<double> partial_[2]; // the levels' partial sums, alternately
};

} // namespace cohort::device
