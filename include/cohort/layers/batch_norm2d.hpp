#pragma once
/// \file
/// Batch normalisation over the channels of (C, H, W) samples, as torch.nn.BatchNorm2d.
/// Example (compiled: tests/docs/headers.cpp, "layers/batch_norm2d"):
///
///     using Block = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 5, 1, 2>, BatchNorm2d<16>, ReLU>;
///
/// Training mode normalises with the batch's statistics (biased variance) and updates
/// running_mean/running_var with `Momentum` (the running variance is unbiased, as PyTorch's);
/// evaluation mode uses the running statistics. Statistics are accumulated in double on the CPU,
/// as PyTorch does. State dict: "weight", "bias", "running_mean", "running_var",
/// "num_batches_tracked".

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

namespace detail {
/// What BatchNorm2d and BatchNorm1d share once bound to S: the tensors (PyTorch's names, order
/// and defaults), the float weights under mixed precision, the train / eval forward with the
/// running statistics' update, the backward, and the fused ReLU. Channels are G::channels
/// (a ChannelGeometry), each normalised over the batch and its G::plane values.
template <class Layer, class S, class G, float Eps, float Momentum>
struct BoundBatchNorm {
  using layer = Layer;
  using input_shape = S;
  using output_shape = S;
  using geometry = G;
  static constexpr std::size_t channels = G::channels;
  static constexpr float eps = Eps, momentum = Momentum;

  static constexpr std::array<TensorSpec, 2> parameters{{
      {"weight", 1, {channels}, Init::ones, 0},
      {"bias", 1, {channels}, Init::zeros, 0},
  }};
  static constexpr std::array<TensorSpec, 2> buffers{{
      {"running_mean", 1, {channels}, Init::zeros, 0},
      {"running_var", 1, {channels}, Init::ones, 0},
  }};
  static constexpr std::array<TensorSpec, 1> counters{{{"num_batches_tracked", 0, {}, Init::zeros, 0}}};
  static constexpr auto offsets = packed_offsets(parameters);
  static constexpr auto buffer_offsets = packed_offsets(buffers);

  template <class Backend, class T>
  using state = typename ops::BatchNormKernels<Backend>::template workspace<geometry, T>;

  /// gamma and beta as the kernels read them: in the accumulator type. Under mixed precision
  /// that is the float master copy (Apex O2 keeps BatchNorm in fp32).
  template <class Args>
  static const auto* weights(const Args& a) {
    return float_parameters(a);
  }

  /// Whether the backend can apply a following ReLU inside this layer's kernels.
  template <class Backend, class T>
  static constexpr bool fuses_relu = ops::BatchNormKernels<Backend>::template fuses_relu<T>;

  /// What every forward (plain, or fused with ReLU + MaxPool2d) shares: the tensors, the mode,
  /// and moving the running statistics after a training pass that may update them. `eval` gets
  /// the evaluation kernels' arguments, `train` the affine parameters.
  template <class Backend, class T, class Train, class Eval>
  static void forward_with(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws, Train&& train, Eval&& eval) {
    const auto* gamma = weights(a) + offsets[0];
    const auto* beta = weights(a) + offsets[1];
    auto* mean = a.buffers + buffer_offsets[0];
    auto* var = a.buffers + buffer_offsets[1];
    if (a.step.mode != Mode::train)
      return eval(ops::BatchNormEvalArgs<T, std::remove_cvref_t<decltype(*mean)>>{.x = a.x,
                                                                                  .gamma = gamma,
                                                                                  .beta = beta,
                                                                                  .running_mean = mean,
                                                                                  .running_var = var,
                                                                                  .y = a.y,
                                                                                  .batch = a.batch,
                                                                                  .eps = eps,
                                                                                  .relu = a.fused_relu});
    train(gamma, beta);
    if (a.step.update_buffers) {
      ops::BatchNormKernels<Backend>::template update_running<geometry>(a.ctx, mean, var, a.batch, momentum, ws);
      ++a.counters[0];
    }
  }
  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
    using K = ops::BatchNormKernels<Backend>;
    forward_with(
        a, ws,
        [&](const auto* gamma, const auto* beta) {
          K::template forward_train<geometry>(a.ctx, a.x, gamma, beta, a.y, a.batch, eps, ws, a.fused_relu);
        },
        [&](const auto& eval_args) { K::template forward_eval<geometry>(a.ctx, eval_args, ws); });
  }
  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
    // Mode is that of the forward pass (the executor refuses to mix them).
    ops::BatchNormKernels<Backend>::template backward<geometry>(
        a.ctx,
        ops::BatchNormBackwardArgs<T>{.training = a.step.mode == Mode::train,
                                      .x = a.x,
                                      .gamma = weights(a) + offsets[0],
                                      .dy = a.dy,
                                      .dx = a.dx,
                                      .dgamma = a.grads + offsets[0],
                                      .dbeta = a.grads + offsets[1],
                                      .batch = a.batch,
                                      .accumulate = a.accumulate,
                                      .relu_y = a.fused_relu ? a.y : nullptr},
        ws);
  }
};
} // namespace detail

/// `BatchNorm2d<Channels, Eps = 1e-5f, Momentum = 0.1f>` (affine, tracking running statistics).
template <std::size_t Channels, float Eps = 1e-5f, float Momentum = 0.1f>
struct BatchNorm2d {
  static_assert(Channels >= 1, "BatchNorm2d: Channels must be at least 1");
  static_assert(Eps > 0.f, "BatchNorm2d: Eps must be positive");
  static_assert(Momentum >= 0.f && Momentum <= 1.f, "BatchNorm2d: Momentum must be in [0, 1]");

  static constexpr std::string_view name = "BatchNorm2d";
  static std::string signature() { return std::string(name) + detail::template_args(Channels, Eps, Momentum); }
  using expected_input = expect::Image<Channels>;
  template <class S>
  static constexpr bool accepts = ImageShape<S>&& detail::extent_or_zero<S, 0>() == Channels;

  template <class S>
  struct bind : detail::BoundBatchNorm<BatchNorm2d, S, ChannelGeometry<Channels, S::extents[1] * S::extents[2]>, Eps,
                                       Momentum> {
    using base =
        detail::BoundBatchNorm<BatchNorm2d, S, ChannelGeometry<Channels, S::extents[1] * S::extents[2]>, Eps, Momentum>;
    using typename base::geometry;
    template <class Backend, class T>
    using state = typename base::template state<Backend, T>;
    using base::offsets;

    /// Whether the backend can also apply a max-pool of geometry PoolGeometry after that ReLU:
    /// the executor then runs BatchNorm2d -> ReLU -> MaxPool2d as this one layer.
    template <class Backend, class T, class PoolGeometry>
    static constexpr bool fuses_relu_pool = [] {
      if constexpr (requires { ops::BatchNormKernels<Backend>::template fuses_relu_pool<geometry, PoolGeometry, T>; })
        return ops::BatchNormKernels<Backend>::template fuses_relu_pool<geometry, PoolGeometry, T>;
      else
        return false;
    }();

    /// BatchNorm2d -> ReLU -> MaxPool2d fused (fuses_relu_pool): `a.y` is the pool's output.
    template <class Backend, class T, class PoolGeometry>
    static void forward_relu_pool(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      using K = ops::BatchNormKernels<Backend>;
      base::forward_with(
          a, ws,
          [&](const auto* gamma, const auto* beta) {
            K::template forward_train_relu_pool<geometry, PoolGeometry>(a.ctx, a.x, gamma, beta, a.y, a.batch, Eps, ws);
          },
          [&](const auto& eval_args) { // (a fused ReLU is implied)
            K::template forward_eval_relu_pool<geometry, PoolGeometry>(a.ctx, eval_args, ws);
          });
    }
    /// Its backward: `a.dy` and `a.y` are the pool's output gradient and output.
    template <class Backend, class T, class PoolGeometry>
    static void backward_relu_pool(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::BatchNormKernels<Backend>::template backward_relu_pool<geometry, PoolGeometry>(
          a.ctx,
          ops::BatchNormReluPoolBackwardArgs<T>{.training = a.step.mode == Mode::train,
                                                .x = a.x,
                                                .gamma = base::weights(a) + offsets[0],
                                                .dpool = a.dy,
                                                .pooled = a.y,
                                                .dx = a.dx,
                                                .dgamma = a.grads + offsets[0],
                                                .dbeta = a.grads + offsets[1],
                                                .batch = a.batch,
                                                .accumulate = a.accumulate},
          ws);
    }
  };
};

} // namespace cohort
