#pragma once
/// \file
/// Depthwise 2-D convolution: torch.nn.Conv2d(C, C, Kernel, Stride, Padding, groups=C, bias=Bias),
/// one Kernel x Kernel filter per channel (MobileNet's 3x3 stage between the 1x1 expansions).
/// Example (compiled: tests/docs/headers.cpp, "layers/depthwise_conv2d"):
///
///     using Block = Sequential<Input<32, 14, 14>, DepthwiseConv2d<32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU6>;
///
/// State dict: "weight" (C, 1, K, K) and "bias" (C), torch's names and shapes for groups = C,
/// initialised as torch initialises that convolution (fan_in = K * K). Its kernels are memory
/// bound (K * K multiply-adds per element read): ops::DepthwiseConv2dKernels, not Conv2d's.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `DepthwiseConv2d<Channels, Kernel, Stride = 1, Padding = 0, Bias = true>` (square kernel,
/// zero padding, channel multiplier 1).
template <std::size_t Channels, std::size_t Kernel, std::size_t Stride = 1, std::size_t Padding = 0, bool Bias = true>
struct DepthwiseConv2d {
  static_assert(Channels >= 1, "DepthwiseConv2d: Channels must be at least 1");
  static_assert(Kernel >= 1, "DepthwiseConv2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "DepthwiseConv2d: Stride must be at least 1");

  static constexpr std::string_view name = "DepthwiseConv2d";
  static constexpr bool has_bias = Bias;
  /// "DepthwiseConv2d<32,3,1,1>", with ",false" without bias: the C++ spelling.
  static std::string signature() {
    std::string s = std::string(name) + detail::template_args(Channels, Kernel, Stride, Padding);
    if constexpr (!Bias) s.insert(s.size() - 1, ",false");
    return s;
  }
  using expected_input = expect::Image<Channels>;
  template <class In>
  static constexpr bool accepts = ImageShape<In>&& detail::extent_or_zero<In, 0>() == Channels;

  template <class In>
  struct bind : NoTensors {
    static constexpr std::size_t in_h = In::extents[1], in_w = In::extents[2];
    static_assert(Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding,
                  "DepthwiseConv2d: Kernel is larger than the padded input image (the input shape is In in the note)");
    static constexpr bool fits = Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding;

    using layer = DepthwiseConv2d;
    using input_shape = In;
    // A kernel that does not fit falls back to a 1x1 geometry: only the assertion above is reported.
    using geometry =
        Pool2dGeometry<Channels, fits ? in_h : 1, fits ? in_w : 1, fits ? Kernel : 1, Stride, fits ? Padding : 0>;
    using output_shape = Shape<Channels, geometry::out_h, geometry::out_w>;

    static constexpr std::size_t fan_in = Kernel * Kernel; // torch: weight.size(1) * K * K, size(1) = 1
    static constexpr TensorSpec weight_spec{"weight", 4, {Channels, 1, Kernel, Kernel}, Init::uniform_fan_in, fan_in};
    static constexpr auto parameters = [] {
      if constexpr (Bias)
        return std::array<TensorSpec, 2>{{weight_spec, {"bias", 1, {Channels}, Init::uniform_fan_in, fan_in}}};
      else
        return std::array<TensorSpec, 1>{{weight_spec}};
    }();
    static constexpr auto offsets = packed_offsets(parameters);
    template <class P>
    static P* bias(P* slice) {
      if constexpr (Bias)
        return slice + offsets[1];
      else
        return nullptr;
    }

    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::DepthwiseConv2dKernels<Backend>::template forward<geometry>(a.ctx, a.x, a.params + offsets[0],
                                                                       bias(a.params), a.y, a.batch);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      ops::DepthwiseConv2dKernels<Backend>::template backward<geometry>(
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
};

} // namespace cohort
