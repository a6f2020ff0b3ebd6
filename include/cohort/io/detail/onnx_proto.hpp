#pragma once
/// \file
/// The protobuf wire format, as much of it as export_onnx (io/onnx.hpp) writes, and the field
/// numbers of the onnx.proto messages it fills.
///
///     detail::ProtoWriter m;
///     m.int64(detail::onnx_field::Model::ir_version, 8);   // bytes 08 08
///     m.message(detail::onnx_field::Model::graph, graph);   // 3a, varint length, the graph's bytes
///
/// A protobuf message is a sequence of records, each a key (field number << 3 | wire type) and a
/// value: a varint (wire type 0: 7 bits a byte, lowest group first, the high bit set on every
/// byte but the last), a length-delimited run of bytes (wire type 2: strings, bytes, nested
/// messages and packed repeated scalars, the length a varint) or 4 little-endian bytes (wire
/// type 5: float). Readers accept records in any order, and repeated scalars packed or not.

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace cohort::detail {

/// Field numbers and enum values of onnx/onnx.proto (github.com/onnx/onnx, the ONNX IR
/// specification); only the fields export_onnx writes.
struct onnx_field {
  struct Model { // ModelProto
    static constexpr std::uint32_t ir_version = 1, producer_name = 2, doc_string = 6, graph = 7, opset_import = 8;
  };
  struct OperatorSetId { // OperatorSetIdProto
    static constexpr std::uint32_t domain = 1, version = 2;
  };
  struct Graph { // GraphProto
    static constexpr std::uint32_t node = 1, name = 2, initializer = 5, input = 11, output = 12;
  };
  struct Node { // NodeProto
    static constexpr std::uint32_t input = 1, output = 2, name = 3, op_type = 4, attribute = 5;
  };
  struct Attribute { // AttributeProto; `type` holds an AttributeProto.AttributeType
    static constexpr std::uint32_t name = 1, f = 2, i = 3, s = 4, ints = 8, type = 20;
    static constexpr std::int64_t type_float = 1, type_int = 2, type_string = 3, type_ints = 7;
  };
  struct Tensor { // TensorProto; `data_type` holds a TensorProto.DataType
    static constexpr std::uint32_t dims = 1, data_type = 2, int64_data = 7, name = 8, raw_data = 9;
    static constexpr std::int64_t float32 = 1, int64 = 7;
  };
  struct ValueInfo { // ValueInfoProto
    static constexpr std::uint32_t name = 1, type = 2;
  };
  struct Type { // TypeProto: tensor_type is a TypeProto.Tensor
    static constexpr std::uint32_t tensor_type = 1;
  };
  struct TensorType { // TypeProto.Tensor
    static constexpr std::uint32_t elem_type = 1, shape = 2;
  };
  struct Shape { // TensorShapeProto, its `dim` a TensorShapeProto.Dimension
    static constexpr std::uint32_t dim = 1;
  };
  struct Dimension { // TensorShapeProto.Dimension: a size, or a name for a size given at run time
    static constexpr std::uint32_t dim_value = 1, dim_param = 2;
  };
};

/// Appends protobuf records to a byte string. A nested message is written into its own
/// ProtoWriter, then added whole with message(): its length must be known before its bytes.
class ProtoWriter {
 public:
  /// Wire types (the low 3 bits of a key).
  static constexpr std::uint32_t varint_type = 0, length_delimited = 2, fixed32_type = 5;

  /// An unsigned varint: 300 -> AC 02. (A negative int64 is sent as its 64-bit two's complement,
  /// ten bytes, as protobuf's int64 fields are.)
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += char((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += char(v);
  }
  void key(std::uint32_t field, std::uint32_t wire_type) { varint(std::uint64_t(field) << 3 | wire_type); }

  void int64(std::uint32_t field, std::int64_t v) {
    key(field, varint_type);
    varint(std::uint64_t(v));
  }
  void float32(std::uint32_t field, float v) {
    key(field, fixed32_type);
    append_le(std::span<const float>(&v, 1));
  }
  /// A string, a bytes field or (from message()) a nested message.
  void bytes(std::uint32_t field, std::string_view s) {
    key(field, length_delimited);
    varint(s.size());
    out_ += s;
  }
  void message(std::uint32_t field, const ProtoWriter& m) { bytes(field, m.out_); }
  /// A repeated int64 field, packed: one record holding every value's varint.
  void packed_int64(std::uint32_t field, std::span<const std::int64_t> values) {
    ProtoWriter body;
    for (std::int64_t v : values) body.varint(std::uint64_t(v));
    bytes(field, body.out_);
  }
  /// Floats as a bytes field (TensorProto.raw_data: little-endian whatever the host is).
  void raw_floats(std::uint32_t field, std::span<const float> values) {
    key(field, length_delimited);
    varint(values.size_bytes());
    append_le(values);
  }

  const std::string& str() const& noexcept { return out_; }
  std::string str() && noexcept { return std::move(out_); }

 private:
  void append_le(std::span<const float> values) {
    const std::size_t at = out_.size();
    out_.resize(at + values.size_bytes());
    char* dst = out_.data() + at;
    if constexpr (std::endian::native == std::endian::little) {
      if (!values.empty()) std::memcpy(dst, values.data(), values.size_bytes());
    } else {
      for (float f : values) {
        const auto u = std::bit_cast<std::uint32_t>(f);
        for (int b = 0; b < 4; ++b) *dst++ = char(u >> (8 * b));
      }
    }
  }

  std::string out_;
};

} // namespace cohort::detail
