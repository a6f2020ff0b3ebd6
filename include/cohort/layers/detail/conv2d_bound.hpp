#pragma once
/// \file
/// The bound form of a dense convolution (Conv2d with groups = 1): parameters, workspace, and
/// calls into ops::Conv2dKernels, whose fused forms (ReLU, ReLU + max-pool) it offers the
/// executor.

#include <array>
#include <cstddef>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/conv_parameters.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort::detail {

/// `Layer` (a Conv2d) bound to input In, convolving over `Geometry`.
template <class Layer, class In, class Geometry, bool Bias>
struct conv2d_bound : NoTensors {
  using layer = Layer;
  using input_shape = In;
  using geometry = Geometry;
  using output_shape = Shape<Geometry::out_channels, Geometry::out_h, Geometry::out_w>;

  static constexpr std::size_t fan_in = Geometry::patch;
  static constexpr TensorSpec weight_spec{
      "weight",
      4,
      {Geometry::out_channels, Geometry::in_channels, Geometry::kernel, Geometry::kernel},
      Init::uniform_fan_in,
      fan_in};
  static constexpr auto parameters = weight_and_bias<Bias>(weight_spec, Geometry::out_channels);
  static constexpr auto offsets = packed_offsets(parameters);
  /// The bias (or its gradient) in a parameter (or gradient) slice; null without one, which the
  /// kernels take as "no bias": nothing added forward, no sum backward.
  template <class P>
  static P* bias(P* slice) {
    return bias_in<Bias>(slice, offsets);
  }

  template <class Backend, class T>
  using state = typename ops::Conv2dKernels<Backend>::template workspace<Geometry, T>;
  /// Whether the backend can apply a following ReLU inside this layer's kernels.
  template <class Backend, class T>
  static constexpr bool fuses_relu = ops::Conv2dKernels<Backend>::template fuses_relu<Geometry, T>;

  /// Whether the backend can also apply a max-pool of geometry PoolGeometry after that ReLU:
  /// the executor then runs Conv2d -> ReLU -> MaxPool2d as this one layer.
  template <class Backend, class T, class PoolGeometry>
  static constexpr bool fuses_relu_pool = [] {
    if constexpr (requires { ops::Conv2dKernels<Backend>::template fuses_relu_pool<Geometry, PoolGeometry, T>; })
      return ops::Conv2dKernels<Backend>::template fuses_relu_pool<Geometry, PoolGeometry, T>;
    else
      return false;
  }();

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
    ops::Conv2dKernels<Backend>::template forward<Geometry>(a.ctx, a.x, a.params + offsets[0], bias(a.params), a.y,
                                                            a.batch, ws, a.fused_relu);
  }
  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
    ops::Conv2dKernels<Backend>::template backward<Geometry>(
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
    ops::Conv2dKernels<Backend>::template forward_relu_pool<Geometry, PoolGeometry>(a.ctx, a.x, a.params + offsets[0],
                                                                                    bias(a.params), a.y, a.batch, ws);
  }
  /// Its backward: `a.dy` and `a.y` are the pool's output gradient and output.
  template <class Backend, class T, class PoolGeometry>
  static void backward_relu_pool(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
    ops::Conv2dKernels<Backend>::template backward_relu_pool<Geometry, PoolGeometry>(
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

} // namespace cohort::detail
