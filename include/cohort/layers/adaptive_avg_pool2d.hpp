#pragma once
/// \file
/// Global average pooling, as torch.nn.AdaptiveAvgPool2d(1): every (H, W) plane to its mean.
/// Example (compiled: tests/docs/headers.cpp, "layers/adaptive_avg_pool2d"):
///
///     using Head = Sequential<Input<512, 7, 7>, AdaptiveAvgPool2d<1>, Flatten, Linear<512, 10>>;
///
/// Only the output size 1 (what ResNets end with) is implemented.

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `AdaptiveAvgPool2d<OutputSize>`: (C, H, W) -> (C, 1, 1), each value the mean of its plane.
template <std::size_t OutputSize>
struct AdaptiveAvgPool2d {
  static_assert(OutputSize == 1, "AdaptiveAvgPool2d: only OutputSize 1 (global average pooling) is implemented; "
                                 "use AvgPool2d<Kernel, Stride> for other output sizes");

  static constexpr std::string_view name = "AdaptiveAvgPool2d";
  static std::string signature() { return std::string(name) + detail::template_args(OutputSize); }
  using expected_input = expect::AnyImage;
  template <class S>
  static constexpr bool accepts = ImageShape<S>;

  template <class S>
  struct bind : NoTensors {
    static constexpr std::size_t c = S::extents[0], in_h = S::extents[1], in_w = S::extents[2];
    using layer = AdaptiveAvgPool2d;
    using input_shape = S;
    /// Channels of one plane each: the window is the whole plane.
    using geometry = ChannelGeometry<c, in_h * in_w>;
    using output_shape = Shape<c, 1, 1>;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::PoolKernels<Backend>::template global_avg_forward<geometry>(a.ctx, a.x, a.y, a.batch);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::PoolKernels<Backend>::template global_avg_backward<geometry>(a.ctx, a.dy, a.dx, a.batch);
    }
  };
};

} // namespace cohort
