#pragma once
/// \file
/// 2-D average pooling with PyTorch's argument order and defaults (stride = kernel,
/// ceil_mode=False, count_include_pad=True).
/// Example (compiled: tests/docs/headers.cpp, "layers/avg_pool2d"):
///
///     using Net = Sequential<Input<16, 26, 26>, AvgPool2d<2>>;          // -> Shape<16, 13, 13>
///     using Same = Sequential<Input<16, 8, 8>, AvgPool2d<3, 1, 1>>;     // -> Shape<16, 8, 8>
///
/// Every window is divided by Kernel * Kernel, the zero padding included, as PyTorch's default.

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `AvgPool2d<Kernel, Stride = Kernel, Padding = 0>` (square window; padding counts as zeros in
/// the average).
template <std::size_t Kernel, std::size_t Stride = Kernel, std::size_t Padding = 0>
struct AvgPool2d {
  static_assert(Kernel >= 1, "AvgPool2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "AvgPool2d: Stride must be at least 1");
  static_assert(2 * Padding <= Kernel, "AvgPool2d: Padding must be at most half of Kernel");

  static constexpr std::string_view name = "AvgPool2d";
  static std::string signature() { return std::string(name) + detail::template_args(Kernel, Stride, Padding); }
  using expected_input = expect::AnyImage;
  template <class S>
  static constexpr bool accepts = ImageShape<S>;

  template <class S>
  struct bind : NoTensors {
    static constexpr std::size_t c = S::extents[0], in_h = S::extents[1], in_w = S::extents[2];
    static_assert(Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding,
                  "AvgPool2d: Kernel is larger than the padded input image (the input shape is S in the note)");
    static constexpr bool fits = Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding;

    using layer = AvgPool2d;
    using input_shape = S;
    // A 1x1 geometry when the kernel does not fit: only the assertion above is reported.
    using geometry = Pool2dGeometry<c, fits ? in_h : 1, fits ? in_w : 1, fits ? Kernel : 1, Stride, fits ? Padding : 0>;
    using output_shape = Shape<c, geometry::out_h, geometry::out_w>;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::PoolKernels<Backend>::template avg_forward<geometry>(a.ctx, a.x, a.y, a.batch);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::PoolKernels<Backend>::template avg_backward<geometry>(a.ctx, a.dy, a.dx, a.batch);
    }
  };
};

} // namespace cohort
