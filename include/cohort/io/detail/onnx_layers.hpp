#pragma once
/// \file
/// How each layer becomes ONNX nodes (onnx_layer<L>, the table at the top of io/onnx.hpp), and
/// how a chain of layers is walked; a layer without a mapping fails to compile, naming it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/detail/type_list.hpp"
#include "cohort/io/detail/onnx_graph.hpp"
#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/avg_pool2d.hpp"
#include "cohort/layers/batch_norm1d.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/concat.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/conv_transpose2d.hpp"
#include "cohort/layers/depthwise_conv2d.hpp"
#include "cohort/layers/dropout.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/gated.hpp"
#include "cohort/layers/gelu.hpp"
#include "cohort/layers/group_norm.hpp"
#include "cohort/layers/hardsigmoid.hpp"
#include "cohort/layers/hardswish.hpp"
#include "cohort/layers/leaky_relu.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/relu6.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/layers/sigmoid.hpp"
#include "cohort/layers/silu.hpp"
#include "cohort/layers/tanh.hpp"
#include "cohort/layers/upsample.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::detail {

/// How layer descriptor L becomes ONNX nodes: `emit<Bound>(graph, site, x)` appends the nodes
/// of L bound as Bound, reading value x, and returns the name of its output value. Layers
/// without a specialisation have `mapped = false` (export_onnx then fails to compile).
template <class L>
struct onnx_layer {
  static constexpr bool mapped = false;
};

inline std::vector<std::int64_t> onnx_pair(std::size_t v) { return {std::int64_t(v), std::int64_t(v)}; }
inline std::vector<std::int64_t> onnx_pads(std::size_t p) { return std::vector<std::int64_t>(4, std::int64_t(p)); }

/// A square Conv of `Groups` groups (Conv2d's groups; the channel count: DepthwiseConv2d, as torch.onnx
/// writes Conv2d(C, C, groups=C)); the bias input only with Bias. `Transposed`: ConvTranspose
/// instead, as torch.onnx writes ConvTranspose2d (the same weight layout (In, Out, K, K), and
/// output_padding as an attribute: the output size follows from it, as torch's).
template <std::size_t K, std::size_t S, std::size_t P, bool Bias, std::size_t Groups, bool Transposed = false,
          std::size_t OutPad = 0>
struct onnx_conv {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    std::vector<std::string> inputs{x, at.tensor(g, "weight")};
    if constexpr (Bias) inputs.push_back(at.tensor(g, "bias"));
    using A = OnnxAttribute;
    std::vector<OnnxAttribute> attributes{A::integers("dilations", onnx_pair(1)),
                                          A::integer("group", std::int64_t(Groups)),
                                          A::integers("kernel_shape", onnx_pair(K))};
    if constexpr (Transposed) attributes.push_back(A::integers("output_padding", onnx_pair(OutPad)));
    attributes.push_back(A::integers("pads", onnx_pads(P)));
    attributes.push_back(A::integers("strides", onnx_pair(S)));
    return g.node(Transposed ? "ConvTranspose" : "Conv", at.scope, std::move(inputs), std::move(attributes));
  }
};
template <std::size_t In, std::size_t Out, std::size_t K, std::size_t S, std::size_t P, auto... Options>
struct onnx_layer<Conv2d<In, Out, K, S, P, Options...>>
    : onnx_conv<K, S, P, Conv2d<In, Out, K, S, P, Options...>::has_bias, Conv2d<In, Out, K, S, P, Options...>::groups> {
};
template <std::size_t C, std::size_t K, std::size_t S, std::size_t P, bool Bias>
struct onnx_layer<DepthwiseConv2d<C, K, S, P, Bias>> : onnx_conv<K, S, P, Bias, C> {};
template <std::size_t In, std::size_t Out, std::size_t K, std::size_t S, std::size_t P, std::size_t OutPad, bool Bias>
struct onnx_layer<ConvTranspose2d<In, Out, K, S, P, OutPad, Bias>> : onnx_conv<K, S, P, Bias, 1, true, OutPad> {};

/// BatchNorm2d and BatchNorm1d: the same operator (it normalises axis 1 of any rank).
struct onnx_batch_norm {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    std::vector<std::string> inputs{x, at.tensor(g, "weight"), at.tensor(g, "bias"), at.tensor(g, "running_mean"),
                                    at.tensor(g, "running_var")};
    // ONNX's momentum weighs the old statistic, PyTorch's the new one; inference ignores it.
    return g.node("BatchNormalization", at.scope, std::move(inputs),
                  {OnnxAttribute::real("epsilon", Bound::eps), OnnxAttribute::real("momentum", 1.f - Bound::momentum)});
  }
};
template <std::size_t C, float Eps, float Momentum>
struct onnx_layer<BatchNorm2d<C, Eps, Momentum>> : onnx_batch_norm {};
template <std::size_t F, float Eps, float Momentum>
struct onnx_layer<BatchNorm1d<F, Eps, Momentum>> : onnx_batch_norm {};

/// GroupNorm as torch.onnx writes it for opsets before 18 (no GroupNormalization operator):
/// Reshape to (N, Groups, -1), InstanceNormalization with unit scale and zero shift (each group
/// of a sample is one "instance"), Reshape back to the input's shape, then the per-channel
/// affine transform as Mul and Add by the weight and bias unsqueezed to (C, 1, 1).
template <std::size_t Groups, std::size_t Channels, float Eps>
struct onnx_layer<GroupNorm<Groups, Channels, Eps>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    const std::string groups = std::to_string(Groups);
    const std::int64_t grouped_shape[3] = {0, std::int64_t(Groups), -1}, channel_axes[2] = {1, 2};
    const std::vector<float> ones(Groups, 1.f), zeros(Groups, 0.f);
    const std::string shape = g.int64_constant("group_norm.shape." + groups, {3}, grouped_shape);
    const std::string axes = g.int64_constant("group_norm.unsqueeze_axes", {2}, channel_axes);
    const std::string unit = g.constant("group_norm.ones." + groups, {std::int64_t(Groups)}, ones);
    const std::string zero = g.constant("group_norm.zeros." + groups, {std::int64_t(Groups)}, zeros);
    const std::string grouped = g.node("Reshape", at.scope, {x, shape});
    const std::string normalised =
        g.node("InstanceNormalization", at.scope, {grouped, unit, zero}, {OnnxAttribute::real("epsilon", Eps)});
    const std::string input_shape = g.node("Shape", at.scope, {x});
    const std::string restored = g.node("Reshape", at.scope, {normalised, input_shape});
    const std::string weight = g.node("Unsqueeze", at.scope, {at.tensor(g, "weight"), axes});
    const std::string bias = g.node("Unsqueeze", at.scope, {at.tensor(g, "bias"), axes});
    return g.node("Add", at.scope, {g.node("Mul", at.scope, {restored, weight}), bias});
  }
};

template <>
struct onnx_layer<ReLU> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("Relu", at.scope, {x});
  }
};

template <float Slope>
struct onnx_layer<LeakyReLU<Slope>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("LeakyRelu", at.scope, {x}, {OnnxAttribute::real("alpha", Slope)});
  }
};

/// The erf form cohort computes (layers/gelu.hpp), spelled as torch.onnx writes it for opsets
/// without Gelu: x * (1 + erf(x / sqrt(2))) * 0.5.
template <>
struct onnx_layer<GELU> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    const std::string scaled = g.node("Div", at.scope, {x, g.scalar("gelu.sqrt2", 1.41421356237309504880f)});
    const std::string erf = g.node("Erf", at.scope, {scaled});
    const std::string one_plus = g.node("Add", at.scope, {erf, g.scalar("gelu.one", 1.f)});
    const std::string product = g.node("Mul", at.scope, {x, one_plus});
    return g.node("Mul", at.scope, {product, g.scalar("gelu.half", 0.5f)});
  }
};

template <>
struct onnx_layer<SiLU> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("Mul", at.scope, {x, g.node("Sigmoid", at.scope, {x})});
  }
};

/// ReLU6 as torch.onnx writes it from opset 11 on: Clip with min and max as scalar inputs.
template <>
struct onnx_layer<ReLU6> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("Clip", at.scope, {x, g.scalar("relu6.min", 0.f), g.scalar("relu6.max", 6.f)});
  }
};

/// HardSigmoid computes max(0, min(1, alpha * x + beta)): torch's (x + 3) / 6 clamped.
template <>
struct onnx_layer<Hardsigmoid> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("HardSigmoid", at.scope, {x},
                  {OnnxAttribute::real("alpha", 1.f / 6.f), OnnxAttribute::real("beta", 0.5f)});
  }
};

/// The single-operator activations (HardSwish from opset 14).
template <class L>
struct onnx_unary {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node(L::onnx_op, at.scope, {x});
  }
};
struct onnx_hardswish_op {
  static constexpr const char* onnx_op = "HardSwish";
};
struct onnx_sigmoid_op {
  static constexpr const char* onnx_op = "Sigmoid";
};
struct onnx_tanh_op {
  static constexpr const char* onnx_op = "Tanh";
};
template <>
struct onnx_layer<Hardswish> : onnx_unary<onnx_hardswish_op> {};
template <>
struct onnx_layer<Sigmoid> : onnx_unary<onnx_sigmoid_op> {};
template <>
struct onnx_layer<Tanh> : onnx_unary<onnx_tanh_op> {};

template <std::size_t K, std::size_t S, std::size_t P>
struct onnx_layer<MaxPool2d<K, S, P>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    using A = OnnxAttribute;
    return g.node("MaxPool", at.scope, {x},
                  {A::integers("kernel_shape", onnx_pair(K)), A::integers("pads", onnx_pads(P)),
                   A::integers("strides", onnx_pair(S))});
  }
};

template <std::size_t K, std::size_t S, std::size_t P>
struct onnx_layer<AvgPool2d<K, S, P>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    using A = OnnxAttribute;
    return g.node("AveragePool", at.scope, {x},
                  {A::integer("count_include_pad", 1), A::integers("kernel_shape", onnx_pair(K)),
                   A::integers("pads", onnx_pads(P)), A::integers("strides", onnx_pair(S))});
  }
};

/// Output size 1 is global average pooling. (Larger sizes map to AveragePool when they divide
/// the input, as torch.onnx does; cohort's AdaptiveAvgPool2d implements only size 1 so far.)
template <std::size_t OutputSize>
struct onnx_layer<AdaptiveAvgPool2d<OutputSize>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    if constexpr (OutputSize == 1) {
      return g.node("GlobalAveragePool", at.scope, {x});
    } else {
      constexpr std::size_t h = Bound::input_shape::extents[1], w = Bound::input_shape::extents[2];
      static_assert(h % OutputSize == 0 && w % OutputSize == 0 && h == w,
                    "export_onnx: AdaptiveAvgPool2d's OutputSize must divide the (square) input image: ONNX "
                    "has no adaptive average pooling, only AveragePool with one kernel size and stride");
      using A = OnnxAttribute;
      return g.node(
          "AveragePool", at.scope, {x},
          {A::integers("kernel_shape", onnx_pair(h / OutputSize)), A::integers("strides", onnx_pair(h / OutputSize))});
    }
  }
};

/// Dropout and Dropout2d pass their input through in evaluation mode: no node.
struct onnx_identity {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph&, const OnnxLayerSite&, const std::string& x) {
    return x;
  }
};
template <float P>
struct onnx_layer<Dropout<P>> : onnx_identity {};
template <float P>
struct onnx_layer<Dropout2d<P>> : onnx_identity {};

template <>
struct onnx_layer<Flatten> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("Flatten", at.scope, {x}, {OnnxAttribute::integer("axis", 1)});
  }
};

template <std::size_t In, std::size_t Out>
struct onnx_layer<Linear<In, Out>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    using A = OnnxAttribute;
    // weight is (Out, In): y = x W^T + b
    return g.node("Gemm", at.scope, {x, at.tensor(g, "weight"), at.tensor(g, "bias")},
                  {A::real("alpha", 1.f), A::real("beta", 1.f), A::integer("transB", 1)});
  }
};

template <>
struct onnx_layer<LogSoftmax> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    return g.node("LogSoftmax", at.scope, {x}, {OnnxAttribute::integer("axis", 1)});
  }
};

template <class Chain>
std::string onnx_chain(OnnxGraph& g, const float* params, const float* buffers, const std::string& names,
                       const std::string& scope, std::string x);

/// A block: its body and its shortcut each a chain over the block's slice of the stores (the
/// body's tensors first, as layers/residual.hpp lays them out), then their sum.
template <class Body, class Shortcut>
struct onnx_layer<Residual<Body, Shortcut>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    using body = typename Bound::body_chain;
    const float* params = at.params + at.param_base;
    const float* buffers = at.buffers + at.buffer_base;
    const std::string body_out = onnx_chain<body>(g, params, buffers, at.names + "body.", at.scope + "/body", x);
    std::string shortcut_out = x;
    if constexpr (!Bound::identity)
      shortcut_out = onnx_chain<typename Bound::shortcut_chain>(g, params + body::parameter_store_size,
                                                                buffers + body::buffer_store_size,
                                                                at.names + "shortcut.", at.scope + "/shortcut", x);
    return g.node("Add", at.scope, {body_out, shortcut_out});
  }
};

/// A gated block: the gate's chain over the block's slice of the stores, then x * gate (Mul
/// broadcasts the (N, C, 1, 1) gate over H x W).
template <class Gate>
struct onnx_layer<Gated<Gate>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    const std::string gate = onnx_chain<typename Bound::gate_chain>(
        g, at.params + at.param_base, at.buffers + at.buffer_base, at.names + "gate.", at.scope + "/gate", x);
    return g.node("Mul", at.scope, {x, gate});
  }
};

/// A concatenation: each branch a chain over the block's slice of the stores (the first's
/// tensors first, as layers/concat.hpp lays them out; an Identity branch is the input), then
/// Concat along the channels.
template <class First, class Second>
struct onnx_layer<Concat<First, Second>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    const float* params = at.params + at.param_base;
    const float* buffers = at.buffers + at.buffer_base;
    std::string first = x, second = x;
    if constexpr (!Bound::first_identity)
      first = onnx_chain<typename Bound::first_chain>(g, params, buffers, at.names + "first.", at.scope + "/first", x);
    if constexpr (!Bound::second_identity)
      second = onnx_chain<typename Bound::second_chain>(g, params + Bound::first_params, buffers + Bound::first_buffers,
                                                        at.names + "second.", at.scope + "/second", x);
    return g.node("Concat", at.scope, {first, second}, {OnnxAttribute::integer("axis", 1)});
  }
};

/// Upsample as torch.onnx writes nn.Upsample from opset 11 on: Resize with constant scales
/// (1, 1, Scale, Scale) and no roi; nearest as "asymmetric" + "floor" (torch's legacy nearest),
/// bilinear as "linear" with "pytorch_half_pixel" or "align_corners".
template <std::size_t Scale, UpsampleMode Mode, bool AlignCorners>
struct onnx_layer<Upsample<Scale, Mode, AlignCorners>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    const float scales[4] = {1.f, 1.f, float(Scale), float(Scale)};
    const std::string name = g.constant("upsample.scales." + std::to_string(Scale), {4}, scales);
    using A = OnnxAttribute;
    if constexpr (Mode == UpsampleMode::nearest)
      return g.node("Resize", at.scope, {x, "", name},
                    {A::text("coordinate_transformation_mode", "asymmetric"), A::text("mode", "nearest"),
                     A::text("nearest_mode", "floor")});
    else
      return g.node("Resize", at.scope, {x, "", name},
                    {A::text("coordinate_transformation_mode", AlignCorners ? "align_corners" : "pytorch_half_pixel"),
                     A::text("mode", "linear")});
  }
};

/// Fails unless layer Index of Chain (LayerType in the note) has an ONNX mapping.
template <std::size_t Index, class LayerType, class Chain>
constexpr bool check_onnx_mapping() {
  static_assert(onnx_layer<LayerType>::mapped,
                "export_onnx: layer Index (LayerType in the note below; Chain names the Sequential or the "
                "block's branch it is in) has no ONNX mapping; every layer of cohort/layers/ has one, a layer "
                "of your own needs a cohort::detail::onnx_layer<LayerType> specialisation like theirs "
                "(cohort/io/onnx.hpp)");
  return onnx_layer<LayerType>::mapped;
}

template <class Chain, std::size_t I>
std::string onnx_layer_nodes(OnnxGraph& g, const float* params, const float* buffers, const std::string& names,
                             const std::string& scope, const std::string& x) {
  using Bound = at_t<I, typename Chain::layers>;
  using L = typename Bound::layer;
  if constexpr (check_onnx_mapping<I, L, Chain>()) {
    const OnnxLayerSite site{Chain::layout.entries,
                             I,
                             Chain::layout.param_base[I],
                             Chain::layout.buffer_base[I],
                             params,
                             buffers,
                             names + std::to_string(I) + ".",
                             scope + "/" + std::to_string(I)};
    return onnx_layer<L>::template emit<Bound>(g, site, x);
  } else {
    return x;
  }
}

/// Appends the nodes of every layer of Chain, in order, from value x; returns the last value.
/// `names` and `scope` prefix the chain's tensor and node names ("3.body.", "/3/body").
template <class Chain>
std::string onnx_chain(OnnxGraph& g, const float* params, const float* buffers, const std::string& names,
                       const std::string& scope, std::string x) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((x = onnx_layer_nodes<Chain, I>(g, params, buffers, names, scope, x)), ...);
  }
  (std::make_index_sequence<Chain::layer_count>{});
  return x;
}

template <class S>
std::vector<std::size_t> extents_of() {
  return {S::extents.begin(), S::extents.end()};
}

} // namespace cohort::detail
