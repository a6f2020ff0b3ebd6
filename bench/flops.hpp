#pragma once
// Floating-point operations per sample of a Sequential network, computed from its type, for the
// GFLOP/s and fraction-of-peak columns of the benchmarks.
//
//   static_assert(cohort::bench::Flops<cohort::models::ModelA>::forward == 6'094'208);
//
// Convention (the usual one, and the one bench/torch_throughput.py uses for PyTorch): only the
// multiply-adds of Conv2d and Linear count, two operations each; bias, activations, pooling,
// normalisation, loss and optimiser are not counted.
//
//   forward  = sum over Conv2d/Linear of 2 * (output elements per sample) * fan_in
//              (fan_in = in_channels * k * k, or In for Linear)
//   training = forward + weight gradients (= forward) + input gradients (= forward, for every
//              layer but layer 0, whose input gradient the executor never computes)

#include <cstddef>
#include <utility>

#include <cohort/detail/type_list.hpp>

namespace cohort::bench {

namespace detail {

template <class Bound>
constexpr std::size_t forward_flops();

/// The sum of forward_flops over a chain of bound layers (a network, or a residual branch).
template <class Chain>
constexpr std::size_t chain_flops() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return (std::size_t{0} + ... + forward_flops<cohort::detail::at_t<I, typename Chain::layers>>());
  }
  (std::make_index_sequence<Chain::layer_count>{});
}

/// Forward multiply-add operations (x2) per sample of one bound layer: a Conv2d, a Linear, or a
/// residual block (its body, plus its shortcut unless that is the identity); 0 for the rest.
template <class Bound>
constexpr std::size_t forward_flops() {
  if constexpr (requires {
                  Bound::fan_in;
                  typename Bound::geometry;
                })
    return 2 * Bound::output_shape::size * Bound::fan_in; // Conv2d: every output element is a fan_in dot product
  else if constexpr (requires {
                       Bound::in_features;
                       Bound::out_features;
                     })
    return 2 * Bound::in_features * Bound::out_features; // Linear
  else if constexpr (requires {
                       typename Bound::body_chain;
                       Bound::identity;
                     }) {
    if constexpr (Bound::identity)
      return chain_flops<typename Bound::body_chain>();
    else
      return chain_flops<typename Bound::body_chain>() + chain_flops<typename Bound::shortcut_chain>();
  } else
    return 0;
}

} // namespace detail

/// `Flops<Net>::forward` and `Flops<Net>::train`: operations per sample (see the file comment).
template <class Net>
struct Flops {
  static constexpr std::size_t forward = detail::chain_flops<Net>();

  /// The input gradient of layer 0 is skipped by the executor (nothing consumes it).
  static constexpr std::size_t first_layer = detail::forward_flops<cohort::detail::at_t<0, typename Net::layers>>();
  static constexpr std::size_t train = 3 * forward - first_layer;

  static constexpr std::size_t per_sample(bool training) { return training ? train : forward; }
};

} // namespace cohort::bench
