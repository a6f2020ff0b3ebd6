#pragma once
/// \file
/// Group normalisation over the channels of (C, H, W) samples, torch.nn.GroupNorm(num_groups,
/// num_channels, eps, affine=True): statistics per sample, so a batch of 2 (segmentation's usual
/// batch) normalises as well as a batch of 256, and training and evaluation compute the same.
/// Example (compiled: tests/docs/headers.cpp, "layers/group_norm"):
///
///     using Block = Sequential<Input<3, 64, 64>, Conv2d<3, 32, 3, 1, 1, false>, GroupNorm<8, 32>, ReLU>;
///
/// `GroupNorm<Groups, Channels, Eps = 1e-5f>`: the channels split into Groups groups of
/// Channels / Groups consecutive channels; each sample's group is normalised by its own mean and
/// biased variance, then each channel scaled and shifted by "weight" (ones) and "bias" (zeros),
/// torch's names and defaults. No buffers. Under mixed precision the statistics and the affine
/// parameters are float, as BatchNorm's.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

template <std::size_t Groups, std::size_t Channels, float Eps = 1e-5f>
struct GroupNorm {
  static_assert(Groups >= 1, "GroupNorm: Groups must be at least 1");
  static_assert(Channels >= 1, "GroupNorm: Channels must be at least 1");
  static_assert(Channels % Groups == 0,
                "GroupNorm: Channels must be divisible by Groups (torch: num_channels must be divisible by "
                "num_groups)");
  static_assert(Eps > 0.f, "GroupNorm: Eps must be positive");

  static constexpr std::string_view name = "GroupNorm";
  static std::string signature() { return std::string(name) + detail::template_args(Groups, Channels, Eps); }
  using expected_input = expect::Image<Channels>;
  template <class S>
  static constexpr bool accepts = ImageShape<S>&& detail::extent_or_zero<S, 0>() == Channels;

  template <class S>
  struct bind : NoTensors {
    using layer = GroupNorm;
    using input_shape = S;
    using output_shape = S;
    using geometry = GroupNormGeometry<Channels, Groups, S::extents[1] * S::extents[2]>;
    static constexpr float eps = Eps;
    static constexpr std::array<TensorSpec, 2> parameters{{
        {"weight", 1, {Channels}, Init::ones, 0},
        {"bias", 1, {Channels}, Init::zeros, 0},
    }};
    static constexpr auto offsets = packed_offsets(parameters);

    template <class Backend, class T>
    using state = typename ops::GroupNormKernels<Backend>::template workspace<geometry, T>;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      const auto* w = detail::float_parameters(a);
      ops::GroupNormKernels<Backend>::template forward<geometry>(a.ctx, a.x, w + offsets[0], w + offsets[1], a.y,
                                                                 a.batch, Eps, ws);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::GroupNormKernels<Backend>::template backward<geometry>(
          a.ctx,
          ops::GroupNormBackwardArgs<T>{.x = a.x,
                                        .gamma = detail::float_parameters(a) + offsets[0],
                                        .dy = a.dy,
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
