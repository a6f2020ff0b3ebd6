#pragma once
/// \file
/// 2-D convolution over (C, H, W) samples, with PyTorch's argument order and defaults.
/// Example (compiled: tests/docs/headers.cpp, "layers/conv2d"):
///
///     using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU>;   // -> Shape<16, 26, 26>
///     using Stem = Sequential<Input<3, 32, 32>, Conv2d<3, 16, 3, 1, 1, false>, BatchNorm2d<16>>;  // bias=False
///
/// State dict: "weight" (Out, In, K, K) and "bias" (Out), initialised as torch.nn.Conv2d; without
/// bias (`Bias = false`, torch's bias=False, as before a BatchNorm) there is no "bias" tensor and
/// the kernels add none.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `Conv2d<InChannels, OutChannels, Kernel, Stride = 1, Padding = 0, Bias = true>` (square
/// kernel, zero padding).
template <std::size_t InChannels, std::size_t OutChannels, std::size_t Kernel, std::size_t Stride = 1,
          std::size_t Padding = 0, bool Bias = true>
struct Conv2d {
  static_assert(InChannels >= 1, "Conv2d: InChannels must be at least 1");
  static_assert(OutChannels >= 1, "Conv2d: OutChannels must be at least 1");
  static_assert(Kernel >= 1, "Conv2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "Conv2d: Stride must be at least 1");

  static constexpr std::string_view name = "Conv2d";
  static constexpr bool has_bias = Bias;
  /// "Conv2d<16,32,3,1,0>", "Conv2d<16,32,3,1,1,false>" without bias: the C++ spelling.
  static std::string signature() {
    std::string s = std::string(name) + detail::template_args(InChannels, OutChannels, Kernel, Stride, Padding);
    if constexpr (!Bias) s.insert(s.size() - 1, ",false");
    return s;
  }
  using expected_input = expect::Image<InChannels>;
  template <class In>
  static constexpr bool accepts = ImageShape<In>&& detail::extent_or_zero<In, 0>() == InChannels;

  template <class In>
  struct bind : NoTensors {
    static constexpr std::size_t in_h = In::extents[1], in_w = In::extents[2];
    static_assert(Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding,
                  "Conv2d: Kernel is larger than the padded input image (the input shape is In in the note)");
    static constexpr bool fits = Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding;

    using layer = Conv2d;
    using input_shape = In;
    // When the kernel does not fit, fall back to a 1x1 geometry so that only the assertion above
    // is reported, not a cascade of errors from unsigned wrap-around.
    using geometry = Conv2dGeometry<InChannels, OutChannels, fits ? in_h : 1, fits ? in_w : 1, fits ? Kernel : 1,
                                    Stride, fits ? Padding : 0>;
    using output_shape = Shape<OutChannels, geometry::out_h, geometry::out_w>;

    static constexpr std::size_t fan_in = InChannels * Kernel * Kernel;
    static constexpr TensorSpec weight_spec{
        "weight", 4, {OutChannels, InChannels, Kernel, Kernel}, Init::uniform_fan_in, fan_in};
    static constexpr auto parameters = [] {
      if constexpr (Bias)
        return std::array<TensorSpec, 2>{{weight_spec, {"bias", 1, {OutChannels}, Init::uniform_fan_in, fan_in}}};
      else
        return std::array<TensorSpec, 1>{{weight_spec}};
    }();
    static constexpr auto offsets = packed_offsets(parameters);
    /// The bias (or its gradient) in a parameter (or gradient) slice; null without one, which the
    /// kernels take as "no bias": nothing added forward, no sum backward.
    template <class P>
    static P* bias(P* slice) {
      if constexpr (Bias)
        return slice + offsets[1];
      else
        return nullptr;
    }

    template <class Backend, class T>
    using state = typename ops::Conv2dKernels<Backend>::template workspace<geometry, T>;
    /// Whether the backend can apply a following ReLU inside this layer's kernels.
    template <class Backend, class T>
    static constexpr bool fuses_relu = ops::Conv2dKernels<Backend>::template fuses_relu<geometry, T>;

    /// Whether the backend can also apply a max-pool of geometry PoolGeometry after that ReLU:
    /// the executor then runs Conv2d -> ReLU -> MaxPool2d as this one layer.
    template <class Backend, class T, class PoolGeometry>
    static constexpr bool fuses_relu_pool = [] {
      if constexpr (requires { ops::Conv2dKernels<Backend>::template fuses_relu_pool<geometry, PoolGeometry, T>; })
        return ops::Conv2dKernels<Backend>::template fuses_relu_pool<geometry, PoolGeometry, T>;
      else
        return false;
    }();

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::Conv2dKernels<Backend>::template forward<geometry>(a.ctx, a.x, a.params + offsets[0], bias(a.params), a.y,
                                                              a.batch, ws, a.fused_relu);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::Conv2dKernels<Backend>::template backward<geometry>(
          a.ctx,
          ops::Conv2dBackwardArgs<T>{.x = a.x,
                                     .w = a.params + offsets[0],
                                     .dy = a.dy,
                                     .dx = a.dx,
                                     .dw = a.grads + offsets[0],
                                     .db = bias(a.grads),
                                     .batch = a.batch,
                                     .accumulate = a.accumulate,
                                     .relu_y = a.fused_relu ? a.y : nullptr},
          ws);
    }
    /// Conv2d -> ReLU -> MaxPool2d fused (fuses_relu_pool): `a.y` is the pool's output.
    template <class Backend, class T, class PoolGeometry>
    static void forward_relu_pool(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::Conv2dKernels<Backend>::template forward_relu_pool<geometry, PoolGeometry>(a.ctx, a.x, a.params + offsets[0],
                                                                                      bias(a.params), a.y, a.batch, ws);
    }
    /// Its backward: `a.dy` and `a.y` are the pool's output gradient and output.
    template <class Backend, class T, class PoolGeometry>
    static void backward_relu_pool(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::Conv2dKernels<Backend>::template backward_relu_pool<geometry, PoolGeometry>(
          a.ctx,
          ops::Conv2dReluPoolBackwardArgs<T>{.x = a.x,
                                             .w = a.params + offsets[0],
                                             .dpool = a.dy,
                                             .pooled = a.y,
                                             .dx = a.dx,
                                             .dw = a.grads + offsets[0],
                                             .db = bias(a.grads),
                                             .batch = a.batch,
                                             .accumulate = a.accumulate},
          ws);
    }
  };
};

} // namespace cohort
