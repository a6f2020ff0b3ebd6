#pragma once
/// \file
/// Exports a network to ONNX (opset 17), for inference outside cohort: onnxruntime, TensorRT,
/// OpenVINO, or netron to look at it.
///
///     cohort::Network<cohort::models::ResNet20> net(/*seed=*/0);
///     ...                                                  // train
///     cohort::export_onnx(net, "resnet20.onnx");           // or trainer.parameters()
///
///     # Python
///     sess = onnxruntime.InferenceSession("resnet20.onnx")
///     y = sess.run(None, {"input": x})[0]                  # x: float32 (N, 1, 28, 28), any N
///
/// What is written: the network as it computes in evaluation mode, whatever mode it is in
/// (Dropout is left out, BatchNorm normalises with its running statistics), as one graph with
/// input "input" of shape (N, C, H, W) or (N, Features), N a symbolic batch size, and output
/// "output". The weights are initializers named as cohort's state_dict names them ("0.weight",
/// "3.body.1.running_var"), the names PyTorch gives the same model; num_batches_tracked is not
/// written (inference does not use it). The layers map to operators as torch.onnx.export maps
/// them:
///
///     Conv2d            Conv (kernel_shape, strides, pads; bias input only with Bias = true)
///     BatchNorm2d/1d    BatchNormalization (epsilon = Eps, momentum = 1 - Momentum)
///     ReLU / LeakyReLU  Relu / LeakyRelu (alpha = NegativeSlope)
///     GELU              x * 0.5 * (1 + Erf(x / sqrt(2))) as Div, Erf, Add, Mul, Mul (no Gelu
///                       operator before opset 20)
///     SiLU              x * Sigmoid(x)
///     MaxPool2d         MaxPool;   AvgPool2d: AveragePool (count_include_pad = 1)
///     AdaptiveAvgPool2d GlobalAveragePool
///     Dropout/2d        nothing (the identity in evaluation mode)
///     Flatten           Flatten (axis 1);   Linear: Gemm (transB = 1);   LogSoftmax: axis 1
///     Residual          the body's nodes, the shortcut's (none for Identity), then Add
///
/// A layer without a mapping is a compile error naming its position and type.
///
/// Why a writer of its own: an ONNX file is a protobuf message, and the header-only core must
/// not gain a mandatory dependency (libprotobuf, onnx) for one export. The part of the wire
/// format a model needs is small (io/detail/onnx_proto.hpp): varints, length-delimited fields
/// and little-endian raw float data. The file is written atomically (io/atomic_file.hpp).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/core/error.hpp"
#include "cohort/detail/type_list.hpp"
#include "cohort/io/atomic_file.hpp"
#include "cohort/io/detail/onnx_proto.hpp"
#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/avg_pool2d.hpp"
#include "cohort/layers/batch_norm1d.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/dropout.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/gelu.hpp"
#include "cohort/layers/leaky_relu.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/layers/silu.hpp"
#include "cohort/network/network.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

namespace detail {

/// The ONNX IR version and operator set written: IR 8 (ONNX 1.12) is the first with opset 17.
inline constexpr std::int64_t onnx_ir_version = 8;
inline constexpr std::int64_t onnx_opset = 17;

/// A node attribute: an int, a float or a list of ints (all the mapped layers need).
struct OnnxAttribute {
  enum class Kind : std::uint8_t { integer, real, integers };
  std::string name;
  Kind kind = Kind::integer;
  std::int64_t i = 0;
  float f = 0.f;
  std::vector<std::int64_t> ints;

  static OnnxAttribute integer(std::string name, std::int64_t v) {
    return {std::move(name), Kind::integer, v, 0.f, {}};
  }
  static OnnxAttribute real(std::string name, float v) { return {std::move(name), Kind::real, 0, v, {}}; }
  static OnnxAttribute integers(std::string name, std::vector<std::int64_t> v) {
    return {std::move(name), Kind::integers, 0, 0.f, std::move(v)};
  }
};

struct OnnxNode {
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<OnnxAttribute> attributes;
};

/// The graph being built: nodes in execution order (ONNX wants them topologically sorted) and
/// the initializers, already encoded as TensorProto.
class OnnxGraph {
 public:
  /// Appends an `op_type` node named "<scope>/<op_type>" (with "_1", "_2", ... when the scope
  /// has several); returns the name of its output, "<node name>_output_0" as torch names them.
  std::string node(std::string_view op_type, std::string_view scope, std::vector<std::string> inputs,
                   std::vector<OnnxAttribute> attributes = {}) {
    std::string name = std::string(scope) + "/" + std::string(op_type);
    if (const std::size_t n = uses_[name]++; n > 0) name += "_" + std::to_string(n);
    std::string output = name + "_output_0";
    nodes_.push_back({std::string(op_type), std::move(name), std::move(inputs), {output}, std::move(attributes)});
    return output;
  }

  /// Adds a float initializer (the values are copied now); returns its name.
  std::string initializer(std::string name, std::vector<std::int64_t> dims, std::span<const float> values) {
    ProtoWriter t;
    t.packed_int64(onnx_field::Tensor::dims, dims);
    t.int64(onnx_field::Tensor::data_type, onnx_field::Tensor::float32);
    t.bytes(onnx_field::Tensor::name, name);
    t.raw_floats(onnx_field::Tensor::raw_data, values);
    initializers_.push_back(std::move(t).str());
    return name;
  }

  /// A float scalar initializer called `name`, added once however many nodes read it.
  std::string scalar(const std::string& name, float value) {
    if (scalars_.emplace(name, value).second) initializer(name, {}, std::span<const float>(&value, 1));
    return name;
  }

  /// Makes value `last` the graph's output, called "output": renames it where a node produces
  /// it (nothing reads the last value), or copies the input through when no node did.
  void set_output(const std::string& last) {
    for (OnnxNode& n : nodes_)
      for (std::string& o : n.outputs)
        if (o == last) {
          o = "output";
          return;
        }
    nodes_.push_back({"Identity", "/Identity", {last}, {"output"}, {}});
  }

  /// The ModelProto: this graph with input "input" (N, input_dims...) and output "output"
  /// (N, output_dims...), N symbolic; `doc` becomes the model's doc_string.
  std::string model(std::span<const std::size_t> input_dims, std::span<const std::size_t> output_dims,
                    const std::string& doc) const {
    using F = onnx_field;
    ProtoWriter graph;
    for (const OnnxNode& n : nodes_) graph.message(F::Graph::node, encode(n));
    graph.bytes(F::Graph::name, "cohort");
    for (const std::string& t : initializers_) graph.bytes(F::Graph::initializer, t);
    graph.message(F::Graph::input, value_info("input", input_dims));
    graph.message(F::Graph::output, value_info("output", output_dims));

    ProtoWriter opset;
    opset.bytes(F::OperatorSetId::domain, ""); // the default domain, ai.onnx
    opset.int64(F::OperatorSetId::version, onnx_opset);

    ProtoWriter model;
    model.int64(F::Model::ir_version, onnx_ir_version);
    model.bytes(F::Model::producer_name, "cohort");
    model.bytes(F::Model::doc_string, doc);
    model.message(F::Model::graph, graph);
    model.message(F::Model::opset_import, opset);
    return std::move(model).str();
  }

 private:
  static ProtoWriter encode(const OnnxNode& n) {
    using F = onnx_field;
    ProtoWriter w;
    for (const std::string& i : n.inputs) w.bytes(F::Node::input, i);
    for (const std::string& o : n.outputs) w.bytes(F::Node::output, o);
    w.bytes(F::Node::name, n.name);
    w.bytes(F::Node::op_type, n.op_type);
    for (const OnnxAttribute& a : n.attributes) {
      ProtoWriter attr;
      attr.bytes(F::Attribute::name, a.name);
      switch (a.kind) {
      case OnnxAttribute::Kind::integer:
        attr.int64(F::Attribute::i, a.i);
        attr.int64(F::Attribute::type, F::Attribute::type_int);
        break;
      case OnnxAttribute::Kind::real:
        attr.float32(F::Attribute::f, a.f);
        attr.int64(F::Attribute::type, F::Attribute::type_float);
        break;
      case OnnxAttribute::Kind::integers:
        attr.packed_int64(F::Attribute::ints, a.ints);
        attr.int64(F::Attribute::type, F::Attribute::type_ints);
        break;
      }
      w.message(F::Node::attribute, attr);
    }
    return w;
  }

  /// A float tensor value of shape (N, dims...).
  static ProtoWriter value_info(const std::string& name, std::span<const std::size_t> dims) {
    using F = onnx_field;
    ProtoWriter shape;
    ProtoWriter batch;
    batch.bytes(F::Dimension::dim_param, "N");
    shape.message(F::Shape::dim, batch);
    for (std::size_t d : dims) {
      ProtoWriter dim;
      dim.int64(F::Dimension::dim_value, std::int64_t(d));
      shape.message(F::Shape::dim, dim);
    }
    ProtoWriter tensor;
    tensor.int64(F::TensorType::elem_type, F::Tensor::float32);
    tensor.message(F::TensorType::shape, shape);
    ProtoWriter type;
    type.message(F::Type::tensor_type, tensor);
    ProtoWriter info;
    info.bytes(F::ValueInfo::name, name);
    info.message(F::ValueInfo::type, type);
    return info;
  }

  std::vector<OnnxNode> nodes_;
  std::vector<std::string> initializers_;
  std::map<std::string, std::size_t> uses_;
  std::map<std::string, float> scalars_;
};

/// Where one layer sits: its chain's tensor layout and flat stores (a Sequential's, or a branch
/// of a block's slice of them), its position there, and the names it gets.
struct OnnxLayerSite {
  std::span<const LayoutEntry> entries;        // every tensor of the chain
  std::size_t index = 0;                       // the layer's position in the chain
  std::size_t param_base = 0, buffer_base = 0; // the layer's slice of the chain's stores
  const float* params = nullptr;               // the chain's parameter store
  const float* buffers = nullptr;              // the chain's running statistics
  std::string names;                           // state_dict prefix, "3.body.0."
  std::string scope;                           // node-name prefix, "/3/body/0"

  /// Adds the layer's tensor `name` ("weight", "running_var") as an initializer under its
  /// state_dict name; returns that name.
  std::string tensor(OnnxGraph& g, std::string_view name) const {
    for (const LayoutEntry& e : entries)
      if (e.layer == index && e.spec.name == name && e.kind != TensorKind::counter) {
        const float* store = e.kind == TensorKind::parameter ? params : buffers;
        std::vector<std::int64_t> dims(e.spec.dims.begin(), e.spec.dims.begin() + std::ptrdiff_t(e.spec.rank));
        return g.initializer(names + std::string(name), std::move(dims), {store + e.offset, e.spec.size()});
      }
    throw ValueError(concat("export_onnx: internal error: layer ", scope, " has no tensor \"", name, "\""));
  }
};

/// How layer descriptor L becomes ONNX nodes: `emit<Bound>(graph, site, x)` appends the nodes
/// of L bound as Bound, reading value x, and returns the name of its output value. Layers
/// without a specialisation have `mapped = false` (export_onnx then fails to compile).
template <class L>
struct onnx_layer {
  static constexpr bool mapped = false;
};

inline std::vector<std::int64_t> onnx_pair(std::size_t v) { return {std::int64_t(v), std::int64_t(v)}; }
inline std::vector<std::int64_t> onnx_pads(std::size_t p) { return std::vector<std::int64_t>(4, std::int64_t(p)); }

template <std::size_t In, std::size_t Out, std::size_t K, std::size_t S, std::size_t P, bool Bias>
struct onnx_layer<Conv2d<In, Out, K, S, P, Bias>> {
  static constexpr bool mapped = true;
  template <class Bound>
  static std::string emit(OnnxGraph& g, const OnnxLayerSite& at, const std::string& x) {
    std::vector<std::string> inputs{x, at.tensor(g, "weight")};
    if constexpr (Bias) inputs.push_back(at.tensor(g, "bias"));
    using A = OnnxAttribute;
    return g.node("Conv", at.scope, std::move(inputs),
                  {A::integers("dilations", onnx_pair(1)), A::integer("group", 1),
                   A::integers("kernel_shape", onnx_pair(K)), A::integers("pads", onnx_pads(P)),
                   A::integers("strides", onnx_pair(S))});
  }
};

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

} // namespace detail

/// Writes `params` (a network's state, e.g. `trainer.parameters()`) as an ONNX model of Net in
/// evaluation mode; see the top of this file.
///
///     cohort::export_onnx(trainer.parameters(), "model.onnx");
///
/// Throws IoError naming `path` when it cannot be written (the old file, if any, is kept), and
/// ValueError when the model exceeds protobuf's 2 GiB message limit.
template <NetworkDescription Net>
void export_onnx(const Parameters<Net, float, Cpu>& params, const std::filesystem::path& path) {
  detail::OnnxGraph g;
  const std::string last =
      detail::onnx_chain<Net>(g, params.values.data(), params.buffers.data(), "", "", std::string("input"));
  g.set_output(last);
  const auto in = detail::extents_of<typename Net::input_shape>();
  const auto out = detail::extents_of<typename Net::output_shape>();
  const std::string bytes = g.model(in, out, Net::signature());
  if (bytes.size() > 0x7fffffffu)
    throw ValueError(detail::concat(path.string(), ": the ONNX model would take ", bytes.size(),
                                    " bytes; protobuf messages are limited to 2 GiB"));
  const std::span<const char> part(bytes.data(), bytes.size());
  write_file_atomically(path, std::span<const std::span<const char>>(&part, 1));
}

/// Writes network `net` as an ONNX model in evaluation mode (its own mode is left unchanged).
///
///     cohort::export_onnx(net, "model.onnx");
template <NetworkDescription Net>
void export_onnx(const Network<Net, float, Cpu>& net, const std::filesystem::path& path) {
  export_onnx(net.parameters(), path);
}

} // namespace cohort
