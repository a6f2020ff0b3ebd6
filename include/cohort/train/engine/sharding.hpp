#pragma once
/// \file
/// How engines cut a step's batch into shards (replicas, deterministic chunks, ranks) and weigh
/// each shard's loss so that the step's loss and gradient are those of the whole batch.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/loss/cross_entropy_options.hpp"
#include "cohort/loss/loss.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort::detail {

/// How a shard of a step's batch (a replica's, a chunk's, a rank's) enters the step's mean loss:
/// the shard's loss is normalised by `denominator` (0: its own sample count) and then, with its
/// gradient, multiplied by `share`. Without class weights that is the shard's mean times
/// count / n (DataParallel's); with them the shard is divided by the step's global weight total
/// `total` directly (a shard's own total may be 0, and smoothing still gives it a loss).
struct ShardNorm {
  double share = 1, denominator = 0;
};
inline ShardNorm shard_norm(std::size_t count, std::size_t n, double total) {
  if (total > 0) return {1.0, total};
  return {double(count) / double(n), 0.0};
}

/// The global weight total of a step's batch for a loss with class weights (0 without: shards
/// weigh by count). `labels` are this process's; `collectives.sum` adds the class counts of
/// every rank's (integers: the same total on every rank, for any split).
///
/// A per-pixel loss (PixelCrossEntropyLoss) always has one: the mean is over the step's counted
/// pixels (not ignore_index), however many of them each shard holds, so every shard divides by
/// the weight total of the whole step's (0 when every pixel is ignored: each shard's loss is 0).
/// Float targets (a dense network's regression) weigh by count: every sample has as many.
template <std::size_t Classes, class Loss, class Collectives, class L>
double step_weight_total(const Loss& loss, std::span<const L> labels, Collectives& collectives) {
  if constexpr (std::is_same_v<L, float>) {
    return 0.0;
  } else if constexpr (requires { loss.ignore_index(); }) {
    std::vector<double> counts(Classes, 0.0);
    loss.count_classes(labels, counts);
    collectives.sum(counts, "the class counts of the step's pixels");
    return loss.weight_total(counts);
  } else if constexpr (!requires { loss.weighted(); }) {
    return 0.0;
  } else {
    if (!loss.weighted()) return 0.0;
    const auto& w = loss.options().class_weights;
    check_labels("CrossEntropyLoss", labels, labels.size(), Classes);
    std::vector<double> counts(Classes + 1, 0.0); // + the sample count (for the message)
    count_classes(labels, std::span<double>(counts).first(Classes));
    counts[Classes] = double(labels.size());
    collectives.sum(counts, "the class counts of the step's labels");
    const double total = weight_total(w, std::span<const double>(counts).first(Classes));
    check_weight_total("CrossEntropyLoss", total, std::size_t(counts[Classes]));
    return total;
  }
}

/// Copies samples first, first + stride, ... (count of them) of a batch into `x` and `labels`
/// (`PerSample` labels each: one, a dense network's H * W, or its regression targets): deterministic
/// mode's chunk j of a batch is its samples j, j + chunks, j + 2 * chunks, ...
template <class Shape, std::size_t PerSample = 1, class L = std::int32_t>
std::size_t gather_strided(const float* x, std::span<const L> labels, std::size_t first, std::size_t stride,
                           HostBuffer<float>& out_x, std::vector<L>& out_labels) {
  const std::size_t samples = labels.size() / PerSample;
  const std::size_t n = samples > first ? (samples - first + stride - 1) / stride : 0;
  if (out_x.size() < n * Shape::size) out_x.resize(n * Shape::size);
  out_labels.resize(n * PerSample);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t src = first + i * stride;
    std::copy(x + src * Shape::size, x + (src + 1) * Shape::size, out_x.data() + i * Shape::size);
    std::copy_n(labels.data() + src * PerSample, PerSample, out_labels.data() + i * PerSample);
  }
  return n;
}

/// The replica count of ThreadedReplicas<N>: N, or the run-time count for dynamic_replicas.
template <std::size_t N>
std::size_t replica_count(const DataParallelOptions& o) {
  if constexpr (N != dynamic_replicas) {
    return N;
  } else {
    if (o.replicas == 0) throw ValueError("ThreadedReplicas: replicas must be at least 1");
    return o.replicas;
  }
}

/// Samples [begin, begin + count) of a batch of n cut into `parts` contiguous shards: shard r's.
inline std::pair<std::size_t, std::size_t> contiguous_shard(std::size_t n, std::size_t parts, std::size_t r) noexcept {
  const std::size_t base = n / parts, extra = n % parts;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

/// Checks the deterministic-mode chunk count against the number of parts (replicas or ranks)
/// that share a global batch.
inline void check_chunks(const DataParallelOptions& o, std::size_t parts, const char* what) {
  if (!o.deterministic) return;
  if (o.deterministic_chunks == 0 || o.deterministic_chunks % parts != 0)
    throw ValueError(concat("deterministic mode: deterministic_chunks (", o.deterministic_chunks,
                            ") must be a positive multiple of the ", what, " (", parts, ")"));
}

} // namespace cohort::detail
