// export_onnx (io/onnx.hpp): the protobuf wire format byte for byte, and exported files read back
// by a minimal protobuf reader (node operators in order, initializers, names, shapes, errors).
// tests/reference/onnx_runtime.py runs the exported models in onnxruntime.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <cohort/backend/cpu.hpp>
#include <cohort/io/onnx.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;
using F = detail::onnx_field;

namespace {
using test::TempDir;
std::string bytes_of(std::initializer_list<unsigned> b) {
  std::string s;
  for (unsigned c : b) s += char(c);
  return s;
}

/// One record of a protobuf message: a varint or fixed32 value, or length-delimited bytes.
struct Field {
  std::uint32_t number = 0, wire_type = 0;
  std::uint64_t value = 0;
  std::string_view bytes;
};

/// The records of a message, in order (the minimal reader these tests need; throws on bytes
/// that are not a well-formed message).
std::vector<Field> parse(std::string_view m) {
  std::size_t at = 0;
  const auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= m.size() || shift > 63) throw std::runtime_error("truncated varint");
      const auto b = std::uint8_t(m[at++]);
      v |= std::uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  std::vector<Field> out;
  while (at < m.size()) {
    const std::uint64_t key = varint();
    Field f{std::uint32_t(key >> 3), std::uint32_t(key & 7), 0, {}};
    if (f.wire_type == 0) {
      f.value = varint();
    } else if (f.wire_type == 2) {
      const std::uint64_t n = varint();
      if (n > m.size() - at) throw std::runtime_error("length past the end");
      f.bytes = m.substr(at, n);
      at += n;
    } else if (f.wire_type == 5) {
      if (m.size() - at < 4) throw std::runtime_error("truncated fixed32");
      std::uint32_t v = 0;
      for (int b = 0; b < 4; ++b) v |= std::uint32_t(std::uint8_t(m[at++])) << (8 * b);
      f.value = v;
    } else {
      throw std::runtime_error("unexpected wire type");
    }
    out.push_back(f);
  }
  return out;
}

std::vector<Field> all(std::string_view m, std::uint32_t number) {
  std::vector<Field> out;
  for (const Field& f : parse(m))
    if (f.number == number) out.push_back(f);
  return out;
}
Field one(std::string_view m, std::uint32_t number) {
  const auto f = all(m, number);
  REQUIRE(f.size() == 1);
  return f[0];
}
/// The values of a packed repeated int64 field.
std::vector<std::int64_t> packed(std::string_view bytes) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = std::uint8_t(bytes[at++]);
      v |= std::uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    out.push_back(std::int64_t(v));
  }
  return out;
}
float as_float(const Field& f) {
  const auto u = std::uint32_t(f.value);
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

/// An exported model, read back.
struct Model {
  std::string file;
  std::string_view graph;
  explicit Model(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
    graph = one(file, F::Model::graph).bytes;
  }
  std::vector<std::string> op_types() const {
    std::vector<std::string> out;
    for (const Field& n : all(graph, F::Graph::node)) out.emplace_back(one(n.bytes, F::Node::op_type).bytes);
    return out;
  }
  std::vector<std::string_view> nodes() const {
    std::vector<std::string_view> out;
    for (const Field& n : all(graph, F::Graph::node)) out.push_back(n.bytes);
    return out;
  }
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> dims;
    std::string_view raw;
  };
  std::vector<Tensor> initializers() const {
    std::vector<Tensor> out;
    for (const Field& t : all(graph, F::Graph::initializer)) {
      CHECK(one(t.bytes, F::Tensor::data_type).value == 1); // FLOAT
      const auto dims = all(t.bytes, F::Tensor::dims);
      out.push_back({std::string(one(t.bytes, F::Tensor::name).bytes),
                     dims.empty() ? std::vector<std::int64_t>{} : packed(dims[0].bytes),
                     one(t.bytes, F::Tensor::raw_data).bytes});
    }
    return out;
  }
};

std::vector<std::string_view> strings(std::string_view m, std::uint32_t number) {
  std::vector<std::string_view> out;
  for (const Field& f : all(m, number)) out.push_back(f.bytes);
  return out;
}

/// The attribute `name` of a node.
std::string_view attribute(std::string_view node, std::string_view name) {
  for (const Field& a : all(node, F::Node::attribute))
    if (one(a.bytes, F::Attribute::name).bytes == name) return a.bytes;
  FAIL("no attribute " << name);
  return {};
}

/// (name, dim_param of dim 0, dims 1..) of a graph input or output.
struct ValueInfo {
  std::string name, batch;
  std::vector<std::int64_t> dims;
};
ValueInfo value_info(std::string_view v) {
  ValueInfo out{std::string(one(v, F::ValueInfo::name).bytes), "", {}};
  const auto tensor = one(one(v, F::ValueInfo::type).bytes, F::Type::tensor_type).bytes;
  CHECK(one(tensor, F::TensorType::elem_type).value == 1);
  const auto dims = all(one(tensor, F::TensorType::shape).bytes, F::Shape::dim);
  REQUIRE(!dims.empty());
  out.batch = one(dims[0].bytes, F::Dimension::dim_param).bytes;
  for (std::size_t i = 1; i < dims.size(); ++i)
    out.dims.push_back(std::int64_t(one(dims[i].bytes, F::Dimension::dim_value).value));
  return out;
}

using Small = Sequential<Input<2, 6, 6>, Conv2d<2, 4, 3, 1, 1, false>, BatchNorm2d<4, 1e-3f>, GELU,
                         Residual<Branch<Conv2d<4, 8, 3, 2, 1, false>, BatchNorm2d<8>, SiLU>,
                                  Branch<Conv2d<4, 8, 1, 2, 0, false>, BatchNorm2d<8>>>,
                         LeakyReLU<0.2f>, Dropout<0.5f>, AdaptiveAvgPool2d<1>, Flatten, Linear<8, 3>>;
} // namespace

TEST_CASE("onnx: varints, keys and packed fields are protobuf's encoding") {
  const auto varint = [](std::uint64_t v) {
    detail::ProtoWriter w;
    w.varint(v);
    return w.str();
  };
  CHECK(varint(0) == bytes_of({0x00}));
  CHECK(varint(1) == bytes_of({0x01}));
  CHECK(varint(127) == bytes_of({0x7f}));
  CHECK(varint(128) == bytes_of({0x80, 0x01}));
  CHECK(varint(300) == bytes_of({0xac, 0x02}));
  CHECK(varint(~std::uint64_t(0)) == bytes_of({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));

  detail::ProtoWriter w;
  w.int64(1, 150); // protobuf's documentation example: 08 96 01
  w.bytes(2, "testing");
  w.float32(2, 1.f);
  const std::int64_t values[] = {3, 270, 86942};
  w.packed_int64(4, values); // the documentation's packed example: 22 06 03 8e 02 9e a7 05
  w.int64(3, -1);            // a negative int64: ten bytes
  CHECK(w.str() == bytes_of({0x08, 0x96, 0x01, 0x12, 0x07, 't',  'e',  's',  't',  'i',  'n',  'g',
                             0x15, 0x00, 0x00, 0x80, 0x3f, 0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7,
                             0x05, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));

  const float raw[] = {1.f, -2.f};
  detail::ProtoWriter r;
  r.raw_floats(9, raw); // little-endian IEEE floats
  CHECK(r.str() == bytes_of({0x4a, 0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}));
}

TEST_CASE("onnx: model A exports its layers in order, its weights under state_dict names") {
  TempDir dir;
  Network<models::ModelA> net(3);
  export_onnx(net, dir.path / "a.onnx");
  const Model m(dir.path / "a.onnx");

  CHECK(one(m.file, F::Model::ir_version).value == 8);
  const auto opset = one(m.file, F::Model::opset_import).bytes;
  CHECK(one(opset, F::OperatorSetId::version).value == 17);
  CHECK(one(opset, F::OperatorSetId::domain).bytes.empty());
  CHECK(one(m.file, F::Model::doc_string).bytes == models::ModelA::signature());

  // Conv, ReLU, Conv, ReLU, MaxPool2d, Dropout2d, Flatten, Linear, ReLU, Dropout, Linear, LogSoftmax
  CHECK(m.op_types() == std::vector<std::string>{"Conv", "Relu", "Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Relu",
                                                 "Gemm", "LogSoftmax"});
  const auto nodes = m.nodes();
  CHECK(strings(nodes[0], F::Node::input) == std::vector<std::string_view>{"input", "0.weight", "0.bias"});
  CHECK(strings(nodes[1], F::Node::input) == strings(nodes[0], F::Node::output));
  CHECK(one(nodes[0], F::Node::name).bytes == "/0/Conv");
  CHECK(strings(nodes.back(), F::Node::output) == std::vector<std::string_view>{"output"});
  CHECK(packed(one(attribute(nodes[0], "kernel_shape"), F::Attribute::ints).bytes) == std::vector<std::int64_t>{3, 3});
  CHECK(packed(one(attribute(nodes[4], "strides"), F::Attribute::ints).bytes) == std::vector<std::int64_t>{2, 2});
  CHECK(one(attribute(nodes[6], "transB"), F::Attribute::i).value == 1);
  CHECK(one(attribute(nodes[9], "axis"), F::Attribute::i).value == 1);
  // Flatten reads the pool's output: the Dropout2d between them has no node
  CHECK(strings(nodes[5], F::Node::input) == strings(nodes[4], F::Node::output));

  const auto inits = m.initializers();
  REQUIRE(inits.size() == 8);
  const std::vector<std::string> names{"0.weight", "0.bias", "2.weight",  "2.bias",
                                       "7.weight", "7.bias", "10.weight", "10.bias"};
  const std::vector<std::vector<std::int64_t>> dims{{16, 1, 3, 3}, {16}, {32, 16, 3, 3}, {32},
                                                    {64, 4608},    {64}, {10, 64},       {10}};
  std::size_t total = 0;
  for (std::size_t i = 0; i < inits.size(); ++i) {
    CAPTURE(i);
    CHECK(inits[i].name == names[i]);
    CHECK(inits[i].dims == dims[i]);
    std::size_t n = 1;
    for (auto d : dims[i]) n *= std::size_t(d);
    CHECK(inits[i].raw.size() == 4 * n);
    total += n;
  }
  CHECK(total == models::ModelA::parameter_count);
  // the values are the network's, bit for bit
  auto params = net.parameters();
  const TensorRef w7 = params.find("7.weight");
  CHECK(std::memcmp(inits[4].raw.data(), w7.data, w7.bytes()) == 0);

  const ValueInfo in = value_info(one(m.graph, F::Graph::input).bytes);
  CHECK(in.name == "input");
  CHECK(in.batch == "N");
  CHECK(in.dims == std::vector<std::int64_t>{1, 28, 28});
  const ValueInfo out = value_info(one(m.graph, F::Graph::output).bytes);
  CHECK(out.name == "output");
  CHECK(out.batch == "N");
  CHECK(out.dims == std::vector<std::int64_t>{10});
}

TEST_CASE("onnx: BatchNorm, GELU, SiLU, a projection block and pooling map as torch.onnx maps them") {
  TempDir dir;
  Parameters<Small, float, Cpu> p;
  p.initialize(5);
  export_onnx(p, dir.path / "small.onnx");
  const Model m(dir.path / "small.onnx");
  CHECK(m.op_types() == std::vector<std::string>{"Conv", "BatchNormalization", "Div", "Erf", "Add", "Mul", "Mul",
                                                 "Conv", "BatchNormalization", "Sigmoid", "Mul", "Conv",
                                                 "BatchNormalization", "Add", "LeakyRelu", "GlobalAveragePool",
                                                 "Flatten", "Gemm"});
  const auto nodes = m.nodes();
  CHECK(strings(nodes[0], F::Node::input) == std::vector<std::string_view>{"input", "0.weight"}); // bias=False
  CHECK(strings(nodes[1], F::Node::input).at(4) == "1.running_var");
  CHECK(as_float(one(attribute(nodes[1], "epsilon"), F::Attribute::f)) == 1e-3f);
  CHECK(as_float(one(attribute(nodes[1], "momentum"), F::Attribute::f)) == 1.f - 0.1f);
  CHECK(as_float(one(attribute(nodes[14], "alpha"), F::Attribute::f)) == 0.2f);
  // the block: body, shortcut (both read the block's input, the GELU's output), their sum
  CHECK(strings(nodes[7], F::Node::input).at(0) == strings(nodes[6], F::Node::output).at(0));
  CHECK(strings(nodes[11], F::Node::input) ==
        std::vector<std::string_view>{strings(nodes[6], F::Node::output).at(0), "3.shortcut.0.weight"});
  CHECK(strings(nodes[13], F::Node::input) == std::vector<std::string_view>{strings(nodes[10], F::Node::output).at(0),
                                                                            strings(nodes[12], F::Node::output).at(0)});
  CHECK(one(nodes[13], F::Node::name).bytes == "/3/Add");
  CHECK(one(nodes[7], F::Node::name).bytes == "/3/body/0/Conv");
  CHECK(one(nodes[6], F::Node::name).bytes == "/2/Mul_1"); // names stay unique within a layer

  std::vector<std::string> names;
  for (const auto& t : m.initializers()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"0.weight",
                                          "1.weight",
                                          "1.bias",
                                          "1.running_mean",
                                          "1.running_var",
                                          "gelu.sqrt2",
                                          "gelu.one",
                                          "gelu.half",
                                          "3.body.0.weight",
                                          "3.body.1.weight",
                                          "3.body.1.bias",
                                          "3.body.1.running_mean",
                                          "3.body.1.running_var",
                                          "3.shortcut.0.weight",
                                          "3.shortcut.1.weight",
                                          "3.shortcut.1.bias",
                                          "3.shortcut.1.running_mean",
                                          "3.shortcut.1.running_var",
                                          "8.weight",
                                          "8.bias"});
  const auto inits = m.initializers();
  CHECK(inits[5].dims.empty()); // a scalar
  CHECK(inits[5].raw.size() == 4);
  CHECK(inits[17].dims == std::vector<std::int64_t>{8});
  // running statistics come from the buffer store: running_var starts at 1
  float v;
  std::memcpy(&v, inits[17].raw.data(), 4);
  CHECK(v == 1.f);

  // the Network overload writes the same bytes as the Parameters one
  Network<Small> net(5);
  export_onnx(net, dir.path / "net.onnx");
  CHECK(Model(dir.path / "net.onnx").file == m.file);
}

TEST_CASE("onnx: a network of nothing but Dropout passes its input through an Identity node") {
  TempDir dir;
  Network<Sequential<Input<4>, Dropout<0.5f>>> net(0);
  export_onnx(net, dir.path / "d.onnx");
  const Model m(dir.path / "d.onnx");
  REQUIRE(m.op_types() == std::vector<std::string>{"Identity"});
  CHECK(strings(m.nodes()[0], F::Node::input) == std::vector<std::string_view>{"input"});
  CHECK(strings(m.nodes()[0], F::Node::output) == std::vector<std::string_view>{"output"});
  CHECK(m.initializers().empty());
}

TEST_CASE("onnx: a path in a missing directory is an IoError naming it") {
  TempDir dir;
  const fs::path path = dir.path / "missing" / "model.onnx";
  Network<models::ModelC> net(0);
  try {
    export_onnx(net, path);
    FAIL("no error");
  } catch (const IoError& e) {
    INFO(std::string(e.what()));
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
  }
  CHECK(!fs::exists(path));
}
