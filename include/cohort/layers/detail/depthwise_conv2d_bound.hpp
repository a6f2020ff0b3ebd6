#pragma once
/// \file
/// The bound form of a depthwise convolution (torch's Conv2d with groups = in = out channels),
/// shared by DepthwiseConv2d and Conv2d<C, C, K, S, P, Groups{C}>: one K x K filter per channel,
/// run by ops::DepthwiseConv2dKernels (memory-bound kernels of their own, not Conv2d's).

#include <array>
#include <cstddef>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/conv_parameters.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort::detail {

/// `Layer` bound to input In, over a Pool2dGeometry (channels, image, kernel, stride, padding).
template <class Layer, class In, class Geometry, bool Bias>
struct depthwise_conv2d_bound : NoTensors {
  using layer = Layer;
  using input_shape = In;
  using geometry = Geometry;
  static constexpr std::size_t channels = Geometry::channels, kernel = Geometry::kernel;
  using output_shape = Shape<channels, Geometry::out_h, Geometry::out_w>;

  static constexpr std::size_t fan_in = kernel * kernel; // torch: weight.size(1) * K * K, size(1) = 1
  static constexpr TensorSpec weight_spec{"weight", 4, {channels, 1, kernel, kernel}, Init::uniform_fan_in, fan_in};
  static constexpr auto parameters = weight_and_bias<Bias>(weight_spec, channels);
  static constexpr auto offsets = packed_offsets(parameters);
  template <class P>
  static P* bias(P* slice) {
    return bias_in<Bias>(slice, offsets);
  }

  template <class Backend, class T>
  using state = NoState;

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
    ops::DepthwiseConv2dKernels<Backend>::template forward<Geometry>(a.ctx, a.x, a.params + offsets[0], bias(a.params),
                                                                     a.y, a.batch);
  }
  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
    ops::DepthwiseConv2dKernels<Backend>::template backward<Geometry>(
        a.ctx, ops::Conv2dBackwardArgs<T>{.x = a.x,
                                          .w = a.params + offsets[0],
                                          .dy = a.dy,
                                          .dx = a.dx,
                                          .dw = a.grads + offsets[0],
                                          .db = bias(a.grads),
                                          .batch = a.batch,
                                          .accumulate = a.accumulate});
  }
};

} // namespace cohort::detail
