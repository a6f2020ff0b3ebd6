#pragma once
/// \file
/// Index samplers: the order in which the trainer visits a dataset in each epoch.
/// Example (compiled: tests/docs/headers.cpp, "data/sampler"):
///
///     cohort::ShuffleSampler s(60000, /*seed=*/1);
///     std::vector<std::size_t> order;
///     s.indices(epoch, order);   // a permutation of 0..59999 that depends only on (seed, epoch)
///
///     cohort::DistributedSampler d(60000, /*num_replicas=*/4, /*rank=*/1);
///     d.indices(epoch, order);   // this rank's 15000 indices, torch DistributedSampler's split
///
/// Both are pure functions of their arguments and the epoch: no hidden epoch counter (the trainer
/// owns it, and a restored checkpoint resumes with the right order), no generator state.
/// Shuffling is Fisher–Yates driven by `RandomStream{seed, streams::shuffle(epoch)}`, so every
/// rank and every run computes the same permutation without communicating.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/random.hpp"

namespace cohort {
namespace detail {

/// An unbiased integer in [0, bound) from stream `rs`, for a draw identified by `element`
/// (requires bound >= 1), by Lemire's multiply-shift with rejection ("Fast random integer
/// generation in an interval", ACM TOMACS 2019):
///
///     m = x * bound (64-bit product of a 32-bit word x);  result = m >> 32
///
/// maps 2^32 words onto `bound` results, each hit floor(2^32/bound) or one more time. The words
/// whose low half `m mod 2^32` is below `2^32 mod bound` are exactly the surplus ones; rejecting
/// them leaves every result equally likely. The division computing that threshold runs only when
/// the low half is below `bound`, i.e. rarely. `first` is word `element` of the stream (callers
/// that read a whole Philox block pass it in); retry k >= 1 reads word `(k << 32) | element`, so
/// each draw owns its retries and draw `element` never depends on how often another one retried.
/// `element` must be below 2^32. A retry happens with probability below bound / 2^32.
constexpr std::uint32_t uniform_below(const RandomStream& rs, std::uint64_t element, std::uint32_t bound,
                                      std::uint32_t first) noexcept {
  std::uint64_t m = std::uint64_t{first} * bound;
  auto low = static_cast<std::uint32_t>(m);
  if (low < bound) {
    const std::uint32_t threshold = (0u - bound) % bound; // 2^32 mod bound, in 32-bit arithmetic
    for (std::uint64_t k = 1; low < threshold; ++k) {
      m = std::uint64_t{rs.bits((k << 32) | element)} * bound;
      low = static_cast<std::uint32_t>(m);
    }
  }
  return static_cast<std::uint32_t>(m >> 32);
}

/// The same, reading the first word itself.
constexpr std::uint32_t uniform_below(const RandomStream& rs, std::uint64_t element, std::uint32_t bound) noexcept {
  return uniform_below(rs, element, bound, rs.bits(element));
}

/// Throws unless `size` fits the 32-bit draws of `uniform_below`.
inline void check_sampler_size(const char* who, std::size_t size, std::size_t min_size, std::size_t max_size) {
  if (size < min_size || size > max_size)
    throw ValueError(concat(who, ": dataset size ", size, " is out of range (expected ", min_size, "..", max_size,
                            "; indices are drawn from 32-bit random words)"));
}

} // namespace detail

/// Visits `size` samples once per epoch, in a random order fixed by (seed, epoch), or in order.
///
///     cohort::ShuffleSampler s(60000, /*seed=*/1);  std::vector<std::size_t> v;  s.indices(3, v);
///
/// The permutation for an epoch is forward Fisher–Yates: for swap i = 0 .. size-2, position i
/// takes the element at i + uniform_below(size - i), drawn from element i of
/// `RandomStream{seed, streams::shuffle(epoch)}`. It differs from torch.randperm's order (another
/// generator), and unlike torch's DistributedSampler, which seeds with seed + epoch, (seed 1,
/// epoch 0) and (seed 0, epoch 1) give unrelated orders.
class ShuffleSampler {
 public:
  /// The largest dataset: every Fisher–Yates bound must fit one 32-bit random word.
  static constexpr std::size_t max_size = 0xFFFFFFFFu;

  /// Throws ValueError when `size` exceeds `max_size`. An empty dataset gives empty epochs.
  explicit ShuffleSampler(std::size_t size, std::uint64_t seed = 0, bool shuffle = true)
      : size_(size), seed_(seed), shuffle_(shuffle) {
    detail::check_sampler_size("ShuffleSampler", size, 0, max_size);
  }

  std::size_t size() const noexcept { return size_; }
  std::uint64_t seed() const noexcept { return seed_; }
  bool shuffle() const noexcept { return shuffle_; }

  /// Writes the order of epoch `epoch` into `out`, which must hold exactly `size()` elements.
  void fill(std::uint64_t epoch, std::span<std::size_t> out) const {
    if (out.size() != size_)
      throw ValueError(detail::concat("ShuffleSampler: output span has ", out.size(), " elements, expected ", size_,
                                      " (the dataset size)"));
    std::iota(out.begin(), out.end(), std::size_t{0});
    if (!shuffle_ || size_ < 2) return;
    const RandomStream rs{seed_, streams::shuffle(epoch)};
    std::array<std::uint32_t, 4> words{};
    for (std::size_t i = 0; i + 1 < size_; ++i) {
      if ((i & 3) == 0) words = rs.block(i >> 2); // one Philox block serves four swaps
      const auto bound = static_cast<std::uint32_t>(size_ - i);
      const std::size_t j = i + detail::uniform_below(rs, i, bound, words[i & 3]);
      std::swap(out[i], out[j]);
    }
  }

  /// Resizes `out` to `size()` and fills it; reusing `out` across epochs allocates only once.
  void indices(std::uint64_t epoch, std::vector<std::size_t>& out) const {
    out.resize(size_);
    fill(epoch, out);
  }

  /// The order of epoch `epoch` in a new vector.
  std::vector<std::size_t> indices(std::uint64_t epoch) const {
    std::vector<std::size_t> out;
    indices(epoch, out);
    return out;
  }

 private:
  std::size_t size_;
  std::uint64_t seed_;
  bool shuffle_;
};

/// DistributedSampler settings, in torch.utils.data.DistributedSampler's order with its defaults.
struct DistributedSamplerOptions {
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;
};

/// One rank's share of a dataset, split as torch.utils.data.DistributedSampler splits it.
///
///     cohort::DistributedSampler d(10, /*num_replicas=*/3, /*rank=*/1, {.shuffle = false});
///     d.indices(0);   // {1, 4, 7, 0}: 10 indices padded to 12 by wrapping, every 3rd from 1
///
/// Each epoch: take the ShuffleSampler permutation for (seed, epoch), identical on every rank (or
/// 0..size-1 without shuffle); without drop_last, pad it to `total_size()` by wrapping around
/// (index t is permutation[t mod size], as torch's `indices += indices[:padding]`, repeated when
/// the padding exceeds the dataset); with drop_last, cut it to `total_size()`. This rank takes
/// elements rank, rank + num_replicas, ... Every rank gets `num_samples()` indices.
///
/// torch's rules kept as they are: with drop_last and size < num_replicas, num_samples is 0 and
/// every rank gets nothing (torch computes ceil((size - world) / world) = 0 and raises nothing).
/// Differences: the shuffled order is not torch.randperm's (see ShuffleSampler); torch accepts
/// an empty dataset (num_samples 0), here it is a ValueError since training on it is a mistake;
/// the epoch is an argument instead of set_epoch() state.
class DistributedSampler {
 public:
  /// Throws ValueError when num_replicas < 1, rank is outside 0..num_replicas-1, or size is
  /// outside 1..ShuffleSampler::max_size.
  DistributedSampler(std::size_t size, int num_replicas, int rank, DistributedSamplerOptions options = {})
      : permutation_(checked_size(size, num_replicas, rank), options.seed, options.shuffle),
        num_replicas_(num_replicas), rank_(rank), options_(options) {
    const auto world = static_cast<std::size_t>(num_replicas);
    // torch: ceil((size - world) / world) when drop_last and size % world != 0, which for
    // size >= 0 is floor(size / world) (0 when size < world); else ceil(size / world).
    num_samples_ = options.drop_last ? size / world : (size + world - 1) / world;
    total_size_ = num_samples_ * world;
  }

  std::size_t size() const noexcept { return permutation_.size(); }
  int num_replicas() const noexcept { return num_replicas_; }
  int rank() const noexcept { return rank_; }
  const DistributedSamplerOptions& options() const noexcept { return options_; }
  /// Indices per rank and epoch (torch's len(sampler)).
  std::size_t num_samples() const noexcept { return num_samples_; }
  /// num_samples() * num_replicas(): the padded (or cut) length that the ranks share.
  std::size_t total_size() const noexcept { return total_size_; }

  /// Writes this rank's `num_samples()` indices of epoch `epoch` into `out`. When shuffling,
  /// `out` is first used as room for the whole permutation (size() + num_samples() elements);
  /// reusing `out` across epochs allocates only on the first call.
  void indices(std::uint64_t epoch, std::vector<std::size_t>& out) const {
    const std::size_t n = size(), world = static_cast<std::size_t>(num_replicas_),
                      rank = static_cast<std::size_t>(rank_);
    // Element k of this rank is element rank + k*world of the padded list, i.e. of the
    // permutation modulo n (wrapping = padding; with drop_last it never reaches n).
    if (!options_.shuffle) {
      out.resize(num_samples_);
      for (std::size_t k = 0; k < num_samples_; ++k) out[k] = (rank + k * world) % n;
      return;
    }
    // Picking in place would overwrite wrapped-around sources, so picks go after the permutation.
    out.resize(n + num_samples_);
    permutation_.fill(epoch, std::span<std::size_t>(out.data(), n));
    for (std::size_t k = 0; k < num_samples_; ++k) out[n + k] = out[(rank + k * world) % n];
    std::copy(out.begin() + static_cast<std::ptrdiff_t>(n), out.end(), out.begin());
    out.resize(num_samples_);
  }

  /// This rank's indices of epoch `epoch` in a new vector.
  std::vector<std::size_t> indices(std::uint64_t epoch) const {
    std::vector<std::size_t> out;
    indices(epoch, out);
    return out;
  }

 private:
  static std::size_t checked_size(std::size_t size, int num_replicas, int rank) {
    if (num_replicas < 1)
      throw ValueError(
          detail::concat("DistributedSampler: world size ", num_replicas, " is out of range (expected at least 1)"));
    if (rank < 0 || rank >= num_replicas)
      throw ValueError(detail::concat("DistributedSampler: rank ", rank, " is out of range for world size ",
                                      num_replicas, " (expected 0..", num_replicas - 1, ")"));
    detail::check_sampler_size("DistributedSampler", size, 1, ShuffleSampler::max_size);
    return size;
  }

  ShuffleSampler permutation_; // the whole dataset's order, the same on every rank
  int num_replicas_;
  int rank_;
  DistributedSamplerOptions options_;
  std::size_t num_samples_ = 0;
  std::size_t total_size_ = 0;
};

} // namespace cohort
