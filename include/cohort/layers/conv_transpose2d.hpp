#pragma once
/// \file
/// 2-D transposed convolution ("deconvolution") over (C, H, W) samples, torch.nn.ConvTranspose2d
/// with its argument order and defaults: the learned upsampling of a U-Net's decoder.
/// Example (compiled: tests/docs/headers.cpp, "layers/conv_transpose2d"):
///
///     using Up = Sequential<Input<32, 7, 7>, ConvTranspose2d<32, 16, 2, 2>>;         // -> Shape<16, 14, 14>
///     using Odd = Sequential<Input<8, 7, 7>, ConvTranspose2d<8, 4, 3, 2, 1, 1>>;     // output_padding 1: 14 x 14
///     using NoBias = Sequential<Input<8, 5, 5>, ConvTranspose2d<8, 8, 3, 1, 1, 0, false>>;
///
/// `ConvTranspose2d<In, Out, Kernel, Stride = 1, Padding = 0, OutputPadding = 0, bias = true>`:
/// out = (in - 1) * Stride - 2 * Padding + Kernel + OutputPadding per side, as torch's (square
/// kernel; groups and dilation are not supported). OutputPadding must be smaller than Stride.
///
/// State dict: "weight" (In, Out, K, K), torch's layout, and "bias" (Out), initialised as torch
/// does (uniform, fan_in = Out * K * K: torch reads the fan-in from the weight's second axis).
/// Kernels: ops::ConvTranspose2dKernels, which run the convolution this one transposes.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/conv_parameters.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

template <std::size_t InChannels, std::size_t OutChannels, std::size_t Kernel, std::size_t Stride = 1,
          std::size_t Padding = 0, std::size_t OutputPadding = 0, bool Bias = true>
struct ConvTranspose2d {
  static_assert(InChannels >= 1, "ConvTranspose2d: InChannels must be at least 1");
  static_assert(OutChannels >= 1, "ConvTranspose2d: OutChannels must be at least 1");
  static_assert(Kernel >= 1, "ConvTranspose2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "ConvTranspose2d: Stride must be at least 1");
  static_assert(OutputPadding < Stride,
                "ConvTranspose2d: OutputPadding must be smaller than Stride (torch: output padding must be smaller "
                "than either stride or dilation)");

  static constexpr bool has_bias = Bias;
  static constexpr std::string_view name = "ConvTranspose2d";
  /// "ConvTranspose2d<16,8,2,2,0,0>", "ConvTranspose2d<8,8,3,1,1,0,false>".
  static std::string signature() {
    std::string s =
        std::string(name) + detail::template_args(InChannels, OutChannels, Kernel, Stride, Padding, OutputPadding);
    if constexpr (!Bias) s.insert(s.size() - 1, ",false");
    return s;
  }
  using expected_input = expect::Image<InChannels>;
  template <class In>
  static constexpr bool accepts = ImageShape<In>&& detail::extent_or_zero<In, 0>() == InChannels;

 private:
  template <class In>
  static constexpr bool output_exists = (In::extents[1] - 1) * Stride + Kernel + OutputPadding > 2 * Padding &&
                                        (In::extents[2] - 1) * Stride + Kernel + OutputPadding > 2 * Padding;
  // When the padding crops the whole output, a padding-free geometry stands in, so that only
  // bind's assertion is reported.
  template <class In>
  using geometry_of = ConvTranspose2dGeometry<InChannels, OutChannels, In::extents[1], In::extents[2], Kernel, Stride,
                                              output_exists<In> ? Padding : 0, OutputPadding>;

 public:
  template <class In>
  struct bind : NoTensors {
    static_assert(output_exists<In>, "ConvTranspose2d: the padding crops the whole output (out = (in - 1) * Stride - "
                                     "2 * Padding + Kernel + OutputPadding; the input shape is In in the note)");
    using layer = ConvTranspose2d;
    using input_shape = In;
    using geometry = geometry_of<In>;
    using output_shape = Shape<OutChannels, geometry::out_h, geometry::out_w>;

    static constexpr std::size_t fan_in = OutChannels * Kernel * Kernel;
    static constexpr TensorSpec weight_spec{
        "weight", 4, {InChannels, OutChannels, Kernel, Kernel}, Init::uniform_fan_in, fan_in};
    static constexpr auto parameters = detail::weight_and_bias<Bias>(weight_spec, OutChannels);
    static constexpr auto offsets = packed_offsets(parameters);
    template <class P>
    static P* bias(P* slice) {
      return detail::bias_in<Bias>(slice, offsets);
    }

    template <class Backend, class T>
    using state = typename ops::ConvTranspose2dKernels<Backend>::template workspace<geometry, T>;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::ConvTranspose2dKernels<Backend>::template forward<geometry>(a.ctx, a.x, a.params + offsets[0],
                                                                       bias(a.params), a.y, a.batch, ws);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::ConvTranspose2dKernels<Backend>::template backward<geometry>(
          a.ctx,
          ops::ConvTranspose2dBackwardArgs<T>{.x = a.x,
                                              .w = a.params + offsets[0],
                                              .dy = a.dy,
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
