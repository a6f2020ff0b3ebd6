#pragma once
/// \file
/// Gradient buckets: the flat gradient array cut into contiguous ranges that are all-reduced as
/// one message each, in the order backward finishes them.
/// Example (compiled: tests/docs/headers.cpp, "parallel/gradient_buckets"):
///
///     auto buckets = cohort::plan_buckets<Net>(1 << 20);   // about 1 MiB each
///
/// Backward runs from the last layer to the first and calls a hook as each layer's parameter
/// gradients become final. A bucket holds whole layers, from the last backwards, and is ready
/// when the hook fires for its first (lowest) layer, so its all-reduce can start while earlier
/// layers still compute (PyTorch DDP's bucketing, bucket_cap_mb).

#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "cohort/network/freezing.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

/// Elements [begin, end) of the gradient store; complete once layer `first_layer` (the lowest
/// layer with parameters inside) has finished its backward pass.
struct GradientBucket {
  std::size_t begin = 0, end = 0;
  std::size_t first_layer = 0;
  std::size_t size() const noexcept { return end - begin; }
};

/// Buckets of at least `bytes` (the last one, holding layer 0's end of the store, may be
/// smaller), in the order backward completes them. Together they cover the whole store but the
/// frozen layers' parts (network/freezing.hpp: nothing to send for them); a frozen layer also
/// closes the bucket above it, so no bucket spans one.
template <NetworkDescription Net>
std::vector<GradientBucket> plan_buckets(std::size_t bytes, const FrozenLayers& frozen = {}) {
  constexpr auto& base = Net::layout.param_base;
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  const std::size_t target = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
  const auto trainable = [&](std::size_t i) { return base[i + 1] > base[i] && !frozen[i]; };
  std::vector<GradientBucket> out;
  std::size_t end = base[Net::layer_count], low = none; // the open bucket: [base[low], end)
  for (std::size_t i = Net::layer_count; i-- > 0;) {
    if (base[i + 1] == base[i]) continue; // no parameters
    if (frozen[i]) {
      if (low != none) out.push_back({base[low], end, low});
      low = none;
      end = base[i];
      continue;
    }
    low = i;
    if (end - base[i] >= target || [&] {
          for (std::size_t j = 0; j < i; ++j)
            if (trainable(j)) return false;
          return true; // no trainable layer below: close the last bucket here
        }()) {
      out.push_back({base[i], end, i});
      low = none;
      end = base[i];
    }
  }
  return out;
}

/// Marks a layer whose backward completes no bucket.
inline constexpr std::size_t no_bucket = std::numeric_limits<std::size_t>::max();

/// For each layer of Net, the bucket its backward pass completes (no_bucket if none): what a
/// backward hook looks up to start that bucket's all-reduce.
template <NetworkDescription Net>
std::vector<std::size_t> bucket_of_layer(std::span<const GradientBucket> buckets) {
  std::vector<std::size_t> out(Net::layer_count, no_bucket);
  for (std::size_t b = 0; b < buckets.size(); ++b) out[buckets[b].first_layer] = b;
  return out;
}

} // namespace cohort
