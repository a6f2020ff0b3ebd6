#pragma once
/// \file
/// The ONNX graph export_onnx builds (io/onnx.hpp): nodes with their attributes, initializers
/// already encoded as TensorProto, and where each layer sits (its tensor names and stores).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/core/error.hpp"
#include "cohort/detail/type_list.hpp"
#include "cohort/io/detail/onnx_proto.hpp"
#include "cohort/network/network.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::detail {

/// The ONNX IR version and operator set written: IR 8 (ONNX 1.12) is the first with opset 17.
inline constexpr std::int64_t onnx_ir_version = 8;
inline constexpr std::int64_t onnx_opset = 17;

/// A node attribute: an int, a float, a list of ints or a string (all the mapped layers need).
struct OnnxAttribute {
  enum class Kind : std::uint8_t { integer, real, integers, text };
  std::string name;
  Kind kind = Kind::integer;
  std::int64_t i = 0;
  float f = 0.f;
  std::vector<std::int64_t> ints;
  std::string s;

  static OnnxAttribute integer(std::string name, std::int64_t v) {
    return {std::move(name), Kind::integer, v, 0.f, {}, {}};
  }
  static OnnxAttribute real(std::string name, float v) { return {std::move(name), Kind::real, 0, v, {}, {}}; }
  static OnnxAttribute integers(std::string name, std::vector<std::int64_t> v) {
    return {std::move(name), Kind::integers, 0, 0.f, std::move(v), {}};
  }
  static OnnxAttribute text(std::string name, std::string v) {
    return {std::move(name), Kind::text, 0, 0.f, {}, std::move(v)};
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

  /// A float initializer called `name` added once however many nodes read it (Resize's
  /// scales); returns its name.
  std::string constant(const std::string& name, std::vector<std::int64_t> dims, std::span<const float> values) {
    if (constants_.insert(name).second) initializer(name, std::move(dims), values);
    return name;
  }

  /// An int64 initializer called `name` (a Reshape's shape, an Unsqueeze's axes), added once
  /// however many nodes read it; returns its name.
  std::string int64_constant(const std::string& name, std::vector<std::int64_t> dims,
                             std::span<const std::int64_t> values) {
    if (constants_.insert(name).second) {
      ProtoWriter t;
      t.packed_int64(onnx_field::Tensor::dims, dims);
      t.int64(onnx_field::Tensor::data_type, onnx_field::Tensor::int64);
      t.bytes(onnx_field::Tensor::name, name);
      t.packed_int64(onnx_field::Tensor::int64_data, values);
      initializers_.push_back(std::move(t).str());
    }
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
      case OnnxAttribute::Kind::text:
        attr.bytes(F::Attribute::s, a.s);
        attr.int64(F::Attribute::type, F::Attribute::type_string);
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
  std::set<std::string> constants_;
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

} // namespace cohort::detail
