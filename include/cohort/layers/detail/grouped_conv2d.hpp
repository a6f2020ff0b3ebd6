#pragma once
/// \file
/// The bound form of a grouped convolution (Conv2d with 1 < groups, not depthwise): group i's
/// Out / G output channels see only its In / G input channels. Each group runs the dense
/// kernels (ops::Conv2dKernels, every path and precision they have) on its channels, gathered
/// into a dense (batch, In / G, H, W) tensor and its output scattered back: two copies of a
/// group's input and output cost less than its convolution when groups are few (ResNeXt's 32,
/// ShuffleNet's 1x1 groups). Each group keeps a workspace of its own, as the kernels may keep
/// what forward computed for backward (the device's patch matrix).

#include <array>
#include <cstddef>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/conv_parameters.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort::detail {

/// `Layer` bound to input In: `Groups` convolutions over `GroupGeometry` (one group's channels).
template <class Layer, class In, class GroupGeometry, std::size_t Groups, bool Bias>
struct grouped_conv2d_bound : NoTensors {
  using layer = Layer;
  using input_shape = In;
  using group_geometry = GroupGeometry;
  static constexpr std::size_t group_in = GroupGeometry::in_channels, group_out = GroupGeometry::out_channels;
  static constexpr std::size_t in_channels = group_in * Groups, out_channels = group_out * Groups;
  using output_shape = Shape<out_channels, GroupGeometry::out_h, GroupGeometry::out_w>;

  static constexpr std::size_t kernel = GroupGeometry::kernel;
  static constexpr std::size_t fan_in = GroupGeometry::patch; // torch: weight.size(1) * K * K
  static constexpr TensorSpec weight_spec{
      "weight", 4, {out_channels, group_in, kernel, kernel}, Init::uniform_fan_in, fan_in};
  static constexpr auto parameters = weight_and_bias<Bias>(weight_spec, out_channels);
  static constexpr auto offsets = packed_offsets(parameters);
  /// Group g's weights (or their gradient): rows g * Out / G.. of the (Out, In / G, K, K) tensor.
  template <class P>
  static P* group_weight(P* slice, std::size_t g) {
    return slice + offsets[0] + g * group_out * GroupGeometry::patch;
  }
  template <class P>
  static P* group_bias(P* slice, std::size_t g) {
    if constexpr (Bias)
      return slice + offsets[1] + g * group_out;
    else
      return nullptr;
  }

  template <class Backend, class T>
  struct state {
    std::array<typename ops::Conv2dKernels<Backend>::template workspace<GroupGeometry, T>, Groups> groups;
    typename Backend::template buffer<T> x_group;  // one group's input
    typename Backend::template buffer<T> y_group;  // its output, or its output gradient
    typename Backend::template buffer<T> dx_group; // its input gradient
    void reserve(std::size_t batch) {
      for (auto& ws : groups) ws.reserve(batch);
    }
  };

  /// The copy of one group's channels between a full tensor and a dense one.
  static constexpr ops::ChannelCopy gather(std::size_t batch, std::size_t channels, std::size_t plane,
                                           std::size_t group_channels, std::size_t g) {
    return {.batch = batch,
            .plane = plane,
            .channels = group_channels,
            .src_channels = channels,
            .src_first = g * group_channels,
            .dst_channels = group_channels,
            .dst_first = 0};
  }
  static constexpr ops::ChannelCopy scatter(std::size_t batch, std::size_t channels, std::size_t plane,
                                            std::size_t group_channels, std::size_t g) {
    return {.batch = batch,
            .plane = plane,
            .channels = group_channels,
            .src_channels = group_channels,
            .src_first = 0,
            .dst_channels = channels,
            .dst_first = g * group_channels};
  }
  // Buffers only grow (a steady step allocates and zeroes nothing); every copy overwrites what it reads.
  template <class Buffer>
  static void grow(Buffer& b, std::size_t n) {
    if (b.size() < n) b.resize(n);
  }
  static constexpr std::size_t in_plane = GroupGeometry::in_h * GroupGeometry::in_w;
  static constexpr std::size_t out_plane = GroupGeometry::out_plane;

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& st) {
    using E = ops::ElementwiseKernels<Backend>;
    grow(st.x_group, a.batch * GroupGeometry::in_size);
    grow(st.y_group, a.batch * GroupGeometry::out_size);
    for (std::size_t g = 0; g < Groups; ++g) {
      E::copy_channels(a.ctx, a.x, st.x_group.data(), gather(a.batch, in_channels, in_plane, group_in, g));
      ops::Conv2dKernels<Backend>::template forward<GroupGeometry>(a.ctx, st.x_group.data(), group_weight(a.params, g),
                                                                   group_bias(a.params, g), st.y_group.data(), a.batch,
                                                                   st.groups[g], false);
      E::copy_channels(a.ctx, st.y_group.data(), a.y, scatter(a.batch, out_channels, out_plane, group_out, g));
    }
  }
  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& st) {
    using E = ops::ElementwiseKernels<Backend>;
    grow(st.x_group, a.batch * GroupGeometry::in_size);
    grow(st.y_group, a.batch * GroupGeometry::out_size);
    if (a.dx) grow(st.dx_group, a.batch * GroupGeometry::in_size);
    for (std::size_t g = 0; g < Groups; ++g) {
      E::copy_channels(a.ctx, a.x, st.x_group.data(), gather(a.batch, in_channels, in_plane, group_in, g));
      E::copy_channels(a.ctx, a.dy, st.y_group.data(), gather(a.batch, out_channels, out_plane, group_out, g));
      ops::Conv2dKernels<Backend>::template backward<GroupGeometry>(
          a.ctx,
          ops::Conv2dBackwardArgs<T>{.x = st.x_group.data(),
                                     .w = group_weight(a.params, g),
                                     .dy = st.y_group.data(),
                                     .dx = a.dx ? st.dx_group.data() : nullptr,
                                     .dw = group_weight(a.grads, g),
                                     .db = group_bias(a.grads, g),
                                     .batch = a.batch,
                                     .accumulate = a.accumulate},
          st.groups[g]);
      if (a.dx) E::copy_channels(a.ctx, st.dx_group.data(), a.dx, scatter(a.batch, in_channels, in_plane, group_in, g));
    }
  }
};

} // namespace cohort::detail
