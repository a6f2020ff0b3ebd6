#pragma once
/// \file
/// 2-D max pooling with PyTorch's argument order and defaults (stride = kernel).
/// Example (compiled: tests/docs/headers.cpp, "layers/max_pool2d"):
///
///     using Net = Sequential<Input<16, 26, 26>, MaxPool2d<2>>;   // -> Shape<16, 13, 13>
///
/// Ties go to the first maximum in row-major window order and NaN propagates, as in PyTorch;
/// the backward pass routes each gradient to that element.

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `MaxPool2d<Kernel, Stride = Kernel, Padding = 0>` (square window; padding counts as -inf).
template <std::size_t Kernel, std::size_t Stride = Kernel, std::size_t Padding = 0>
struct MaxPool2d {
  static_assert(Kernel >= 1, "MaxPool2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "MaxPool2d: Stride must be at least 1");
  static_assert(2 * Padding <= Kernel, "MaxPool2d: Padding must be at most half of Kernel");

  static constexpr std::string_view name = "MaxPool2d";
  static std::string signature() { return std::string(name) + detail::template_args(Kernel, Stride, Padding); }
  using expected_input = expect::AnyImage;
  template <class S>
  static constexpr bool accepts = ImageShape<S>;

  template <class S>
  struct bind : NoTensors {
    static constexpr std::size_t c = S::extents[0], in_h = S::extents[1], in_w = S::extents[2];
    static_assert(Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding,
                  "MaxPool2d: Kernel is larger than the padded input image (the input shape is S in the note)");
    static constexpr bool fits = Kernel <= in_h + 2 * Padding && Kernel <= in_w + 2 * Padding;

    using layer = MaxPool2d;
    using input_shape = S;
    using geometry = Pool2dGeometry<c, fits ? in_h : 1, fits ? in_w : 1, fits ? Kernel : 1, Stride, fits ? Padding : 0>;
    using output_shape = Shape<c, geometry::out_h, geometry::out_w>;

    template <class Backend, class T>
    using state = typename ops::PoolKernels<Backend>::template workspace<geometry, T>;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::PoolKernels<Backend>::template max_forward<geometry>(a.ctx, a.x, a.y, a.batch, ws);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      if (a.dx) ops::PoolKernels<Backend>::template max_backward<geometry>(a.ctx, a.dy, a.dx, a.batch, ws);
    }
  };
};

/// Whether layer descriptor L is a MaxPool2d (the executor fuses Conv2d -> ReLU -> MaxPool2d).
template <class L>
inline constexpr bool is_max_pool2d = false;
template <std::size_t Kernel, std::size_t Stride, std::size_t Padding>
inline constexpr bool is_max_pool2d<MaxPool2d<Kernel, Stride, Padding>> = true;

} // namespace cohort
