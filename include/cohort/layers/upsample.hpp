#pragma once
/// \file
/// Upsampling by an integer scale factor, PyTorch's `nn.Upsample(scale_factor=Scale, mode=...,
/// align_corners=...)`: nearest (torch's legacy "nearest") and bilinear, align_corners false
/// (torch's default) or true. The decoder half of a U-Net.
/// Example (compiled: tests/docs/headers.cpp, "layers/upsample"):
///
///     using Net = Sequential<Input<16, 7, 7>, Upsample<2>>;                                // -> Shape<16, 14, 14>
///     using Smooth = Sequential<Input<16, 7, 7>, Upsample<2, UpsampleMode::bilinear>>;     // half-pixel centres
///     using Corners = Sequential<Input<16, 7, 7>, Upsample<2, UpsampleMode::bilinear, true>>;
///
/// Indices and weights follow torch's rules exactly (backend/upsample_rules.hpp); backward adds
/// in torch's order. No parameters.

#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/backend/upsample_rules.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `Upsample<Scale, Mode = UpsampleMode::nearest, AlignCorners = false>`: (C, H, W) ->
/// (C, H * Scale, W * Scale).
template <std::size_t Scale, UpsampleMode Mode = UpsampleMode::nearest, bool AlignCorners = false>
struct Upsample {
  static_assert(Scale >= 1, "Upsample: Scale must be at least 1");
  static_assert(Mode == UpsampleMode::bilinear || !AlignCorners,
                "Upsample: align_corners applies to bilinear interpolation only (torch rejects it for nearest)");

  static constexpr std::string_view name = "Upsample";
  static std::string signature() {
    return std::string(name) + "<" + std::to_string(Scale) +
           (Mode == UpsampleMode::nearest ? ",nearest" : ",bilinear") + (AlignCorners ? ",align_corners>" : ">");
  }
  using expected_input = expect::AnyImage;
  template <class S>
  static constexpr bool accepts = ImageShape<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = Upsample;
    using input_shape = S;
    using geometry = UpsampleGeometry<S::extents[0], S::extents[1], S::extents[2], Scale, Mode, AlignCorners>;
    using output_shape = Shape<S::extents[0], geometry::out_h, geometry::out_w>;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::UpsampleKernels<Backend>::template forward<geometry>(a.ctx, a.x, a.y, a.batch);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::UpsampleKernels<Backend>::template backward<geometry>(a.ctx, a.dy, a.dx, a.batch);
    }
  };
};

} // namespace cohort
