#pragma once
/// \file
/// Sums of equal-length segments of a computed sequence, in double, left on the device: two
/// for_each launches and no host synchronisation or temporary allocation (a Thrust
/// reduce_by_key copies its run count back to the host, and allocates, on every call).
///
///     device::SegmentedSum sums;                 // keeps its partial sums between calls
///     sums(ctx.policy(), channels, per_channel, term, out);   // out[s] = sum_j term(s * per_channel + j)
///
/// Each segment is cut into blocks of `block` consecutive terms, summed one after the other by
/// one thread; a second launch adds a segment's block sums in block order. The order is fixed,
/// so the result is the same on every device system and run.

#include <cstddef>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
template <class Term>
struct BlockSum {
  Term term;
  std::size_t length, blocks, block;
  double* partial;
  COHORT_HOST_DEVICE void operator()(std::size_t t) const {
    const std::size_t s = t / blocks, b = t % blocks;
    const std::size_t first = s * length + b * block, last = s * length + (b + 1 == blocks ? length : (b + 1) * block);
    double sum = 0;
    for (std::size_t j = first; j < last; ++j) sum += term(j);
    partial[t] = sum;
  }
};
struct AddBlocks {
  const double* partial;
  std::size_t blocks;
  double* out;
  COHORT_HOST_DEVICE void operator()(std::size_t s) const {
    double sum = 0;
    for (std::size_t b = 0; b < blocks; ++b) sum += partial[s * blocks + b];
    out[s] = sum;
  }
};
} // namespace detail

class SegmentedSum {
 public:
  /// Terms one thread adds in sequence: enough to hide the second launch, few enough that a
  /// large segment still spreads over thousands of threads.
  static constexpr std::size_t block = 256;

  /// out[s] = sum over j < length of term(s * length + j), for s < segments (out: device memory).
  template <class Policy, class Term>
  void operator()(const Policy& policy, std::size_t segments, std::size_t length, Term term, double* out) {
    if (segments == 0) return;
    const std::size_t blocks = length == 0 ? 1 : (length + block - 1) / block;
    partial_.resize_uninitialized(segments * blocks); // grows with the batch, then stays
    for_each_index(policy, segments * blocks, detail::BlockSum<Term>{term, length, blocks, block, partial_.data()});
    for_each_index(policy, segments, detail::AddBlocks{partial_.data(), blocks, out});
  }

 private:
  DeviceBuffer<double> partial_;
};

} // namespace cohort::device
