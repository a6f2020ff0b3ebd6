#pragma once
/// \file
/// 2-D convolution over (C, H, W) samples, with PyTorch's argument order and defaults.
/// Example (compiled: tests/docs/headers.cpp, "layers/conv2d"):
///
///     using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU>;   // -> Shape<16, 26, 26>
///     using Stem = Sequential<Input<3, 32, 32>, Conv2d<3, 16, 3, 1, 1, false>, BatchNorm2d<16>>;  // bias=False
///     using Grouped = Sequential<Input<32, 14, 14>, Conv2d<32, 64, 3, 1, 1, Groups{4}, false>>; // groups=4
///
/// After Padding come torch's keyword arguments, each at most once and in any order: the bias
/// flag (`false` is torch's bias=False, as before a BatchNorm) and `Groups{g}` (groups=g: the
/// input and output channels split into g groups, group i's outputs seeing only group i's
/// inputs; both channel counts must be divisible by g). Dilation is not supported.
///
/// State dict: "weight" (Out, In / Groups, K, K) and "bias" (Out), initialised as
/// torch.nn.Conv2d (fan_in = In / Groups * K * K); without bias there is no "bias" tensor and the
/// kernels add none. Kernels: groups = 1 runs ops::Conv2dKernels; groups = In = Out (depthwise)
/// runs ops::DepthwiseConv2dKernels, as DepthwiseConv2d does; any other grouping runs
/// Conv2dKernels once per group on that group's channels, gathered (layers/detail/grouped_conv2d.hpp).

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/layers/detail/conv2d_bound.hpp"
#include "cohort/layers/detail/depthwise_conv2d_bound.hpp"
#include "cohort/layers/detail/grouped_conv2d.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// Conv2d's groups argument (torch's groups=): `Conv2d<32, 64, 3, 1, 1, Groups{4}>`.
struct Groups {
  std::size_t value = 1;
};

namespace detail {

template <class O>
inline constexpr bool is_conv2d_option = std::is_same_v<O, bool> || std::is_same_v<O, Groups>;

/// Conv2d's options after Padding, read: each a bool (the bias flag) or a Groups.
template <auto... Options>
struct conv2d_options {
  static_assert((is_conv2d_option<std::remove_cvref_t<decltype(Options)>> && ...),
                "Conv2d: the arguments after Padding are the bias flag (true or false, torch's bias=) and "
                "Groups{g} (torch's groups=); an integer there is neither");
  static constexpr std::size_t bias_flags =
      (std::size_t{std::is_same_v<std::remove_cvref_t<decltype(Options)>, bool>} + ... + 0);
  static constexpr std::size_t group_counts =
      (std::size_t{std::is_same_v<std::remove_cvref_t<decltype(Options)>, Groups>} + ... + 0);
  static_assert(bias_flags <= 1, "Conv2d: the bias flag is given more than once");
  static_assert(group_counts <= 1, "Conv2d: Groups is given more than once");

  template <class O>
  static constexpr void read(bool& bias, std::size_t& groups, O option) {
    if constexpr (std::is_same_v<O, bool>)
      bias = option;
    else if constexpr (std::is_same_v<O, Groups>)
      groups = option.value;
  }
  static constexpr auto values = [] {
    struct {
      bool bias = true;
      std::size_t groups = 1;
    } v;
    (read(v.bias, v.groups, Options), ...);
    return v;
  }();
  static constexpr bool bias = values.bias;
  static constexpr std::size_t groups = values.groups;
};

/// Fails unless both channel counts divide into the groups; the note names all three.
template <std::size_t InChannels, std::size_t OutChannels, std::size_t Groups>
constexpr bool check_conv2d_groups() {
  constexpr bool ok = Groups >= 1 && InChannels % Groups == 0 && OutChannels % Groups == 0;
  static_assert(ok, "Conv2d: InChannels and OutChannels must both be divisible by Groups, as torch requires of "
                    "in_channels, out_channels and groups (the three are in the note below)");
  return ok;
}

} // namespace detail

/// `Conv2d<InChannels, OutChannels, Kernel, Stride = 1, Padding = 0, options...>` (square kernel,
/// zero padding); the options are `false` (no bias) and `Groups{g}` (see the file comment).
template <std::size_t InChannels, std::size_t OutChannels, std::size_t Kernel, std::size_t Stride = 1,
          std::size_t Padding = 0, auto... Options>
struct Conv2d {
  static_assert(InChannels >= 1, "Conv2d: InChannels must be at least 1");
  static_assert(OutChannels >= 1, "Conv2d: OutChannels must be at least 1");
  static_assert(Kernel >= 1, "Conv2d: Kernel must be at least 1");
  static_assert(Stride >= 1, "Conv2d: Stride must be at least 1");

  static constexpr bool has_bias = detail::conv2d_options<Options...>::bias;
  static constexpr std::size_t groups = detail::conv2d_options<Options...>::groups;
  static_assert(detail::check_conv2d_groups<InChannels, OutChannels, groups>());
  /// torch's depthwise case (groups = in = out channels): DepthwiseConv2d's kernels.
  static constexpr bool depthwise = (groups > 1) && (groups == InChannels) && (groups == OutChannels);

  static constexpr std::string_view name = "Conv2d";
  /// "Conv2d<16,32,3,1,0>", "Conv2d<16,32,3,1,1,Groups{4},false>": the C++ spelling, options
  /// canonical (groups before the bias flag, defaults left out).
  static std::string signature() {
    std::string s = std::string(name) + detail::template_args(InChannels, OutChannels, Kernel, Stride, Padding);
    if constexpr (groups != 1) s.insert(s.size() - 1, ",Groups{" + std::to_string(groups) + "}");
    if constexpr (!has_bias) s.insert(s.size() - 1, ",false");
    return s;
  }
  using expected_input = expect::Image<InChannels>;
  template <class In>
  static constexpr bool accepts = ImageShape<In>&& detail::extent_or_zero<In, 0>() == InChannels;

 private:
  template <class In>
  static constexpr bool fits_image = (Kernel <= In::extents[1] + 2 * Padding) &&
                                     (Kernel <= In::extents[2] + 2 * Padding);
  // When the kernel does not fit, a 1x1 geometry stands in, so that only bind's assertion is
  // reported, not a cascade of errors from unsigned wrap-around.
  template <class In>
  using geometry_of = Conv2dGeometry<InChannels / groups, OutChannels / groups, fits_image<In> ? In::extents[1] : 1,
                                     fits_image<In> ? In::extents[2] : 1, fits_image<In> ? Kernel : 1, Stride,
                                     fits_image<In> ? Padding : 0>;
  template <class In>
  using bound_of = std::conditional_t<
      groups == 1, detail::conv2d_bound<Conv2d, In, geometry_of<In>, has_bias>,
      std::conditional_t<
          depthwise,
          detail::depthwise_conv2d_bound<Conv2d, In,
                                         Pool2dGeometry<InChannels, geometry_of<In>::in_h, geometry_of<In>::in_w,
                                                        geometry_of<In>::kernel, Stride, geometry_of<In>::padding>,
                                         has_bias>,
          detail::grouped_conv2d_bound<Conv2d, In, geometry_of<In>, groups, has_bias>>>;

 public:
  template <class In>
  struct bind : bound_of<In> {
    static_assert(fits_image<In>,
                  "Conv2d: Kernel is larger than the padded input image (the input shape is In in the note)");
  };
};

} // namespace cohort
