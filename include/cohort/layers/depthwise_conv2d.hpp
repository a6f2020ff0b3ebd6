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

#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/layers/detail/depthwise_conv2d_bound.hpp"
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

 private:
  template <class In>
  static constexpr bool fits_image = (Kernel <= In::extents[1] + 2 * Padding) &&
                                     (Kernel <= In::extents[2] + 2 * Padding);

 public:
  template <class In>
  struct bind : detail::depthwise_conv2d_bound<
                    DepthwiseConv2d, In,
                    // A kernel that does not fit falls back to a 1x1 geometry: only the assertion below is reported.
                    Pool2dGeometry<Channels, fits_image<In> ? In::extents[1] : 1, fits_image<In> ? In::extents[2] : 1,
                                   fits_image<In> ? Kernel : 1, Stride, fits_image<In> ? Padding : 0>,
                    Bias> {
    static_assert(fits_image<In>,
                  "DepthwiseConv2d: Kernel is larger than the padded input image (the input shape is In in the note)");
  };
};

} // namespace cohort
