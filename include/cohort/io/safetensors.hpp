#pragma once
/// \file
/// Reading and writing the safetensors format (8-byte little-endian header length, a JSON
/// header, then the raw tensor bytes), the format of cohort's checkpoints and test fixtures.
///
///     auto f = cohort::SafetensorsFile::read("model.safetensors");   // validates everything
///     std::vector<float> w = f.values<float>("0.weight");
///
///     cohort::SafetensorsWriter w;
///     w.add("0.weight", cohort::DType::f32, {16, 1, 3, 3}, data, bytes);
///     w.write("model.safetensors");   // atomic
///
/// `read` checks the whole file before returning: header length, JSON syntax, dtype names,
/// that every tensor's byte range matches its shape and dtype, lies inside the file, and that
/// the ranges tile the data section with no gap or overlap. Errors are FormatError naming the
/// path, the tensor and what was expected and found.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/detail/json.hpp"
#include "cohort/io/atomic_file.hpp"

namespace cohort {

/// One tensor's header entry.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::size_t> shape;
  std::size_t begin = 0, end = 0; // byte range within the data section

  std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

/// A safetensors file read into memory and validated.
class SafetensorsFile {
 public:
  /// Largest header accepted (the reference implementation's limit).
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  static SafetensorsFile read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(detail::concat(path.string(), ": cannot open for reading"));
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw IoError(detail::concat(path.string(), ": read failed"));
    return parse(path, std::move(bytes));
  }

  /// Parses and validates `bytes` as the content of `path` (named in errors only).
  static SafetensorsFile parse(const std::filesystem::path& path, std::vector<char> bytes) {
    SafetensorsFile f;
    f.path_ = path;
    f.bytes_ = std::move(bytes);
    f.validate();
    return f;
  }

  const std::filesystem::path& path() const noexcept { return path_; }
  const std::vector<SafetensorsEntry>& entries() const noexcept { return entries_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

  const SafetensorsEntry* find(std::string_view name) const noexcept {
    for (const auto& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  /// The entry called `name`; FormatError if absent.
  const SafetensorsEntry& at(std::string_view name) const {
    if (const auto* e = find(name)) return *e;
    throw FormatError(detail::concat(path_.string(), ": no tensor named \"", name, "\""));
  }
  std::span<const char> bytes(const SafetensorsEntry& e) const noexcept {
    return {bytes_.data() + data_start_ + e.begin, e.end - e.begin};
  }
  /// The values of tensor `name` as `T`; FormatError if its dtype is not T's.
  template <class T>
  std::vector<T> values(std::string_view name) const {
    const auto& e = at(name);
    if (e.dtype != dtype_of<T>)
      throw FormatError(detail::concat(path_.string(), ": tensor \"", name, "\" has dtype ", dtype_name(e.dtype),
                                       ", expected ", dtype_name(dtype_of<T>)));
    std::vector<T> out(e.elements());
    std::memcpy(out.data(), bytes_.data() + data_start_ + e.begin, e.end - e.begin);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(path_.string() + ": " + what); }

  void validate() {
    if (bytes_.size() < 8)
      fail(detail::concat("file is ", bytes_.size(), " bytes; a safetensors file starts with an 8-byte header length"));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes_[std::size_t(i)]);
    if (n > max_header_bytes)
      fail(detail::concat("header length is ", n, " bytes, more than the limit of ", max_header_bytes));
    if (8 + n > bytes_.size())
      fail(detail::concat("header length is ", n, " bytes but the file has only ", bytes_.size() - 8,
                          " bytes after the length field (truncated?)"));
    data_start_ = 8 + std::size_t(n);
    const std::string_view header(bytes_.data() + 8, std::size_t(n));

    detail::JsonValue root;
    try {
      root = detail::JsonParser(header).parse_document();
    } catch (const detail::JsonError& e) {
      fail(detail::concat("header is not valid JSON (", e.what, " at byte ", e.offset, " of the header)"));
    }
    if (root.kind != detail::JsonValue::Kind::object) fail("header is not a JSON object");

    const std::size_t data_size = bytes_.size() - data_start_;
    for (const auto& [name, v] : root.members) {
      if (name == "__metadata__") {
        if (v.kind != detail::JsonValue::Kind::object) fail("__metadata__ is not an object");
        for (const auto& [k, s] : v.members) {
          if (s.kind != detail::JsonValue::Kind::string)
            fail(detail::concat("__metadata__ value of \"", k, "\" is not a string"));
          metadata_[k] = s.text;
        }
        continue;
      }
      entries_.push_back(entry(name, v, data_size));
    }
    // The byte ranges must tile the data section exactly (the format forbids holes).
    std::vector<const SafetensorsEntry*> order;
    for (const auto& e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(),
              [](auto* a, auto* b) { return a->begin < b->begin || (a->begin == b->begin && a->end < b->end); });
    std::size_t cursor = 0;
    for (const auto* e : order) {
      if (e->begin != cursor)
        fail(detail::concat("tensor \"", e->name, "\" starts at byte ", e->begin, " of the data section, expected ",
                            cursor, e->begin < cursor ? " (it overlaps the previous tensor)" : " (there is a gap)"));
      cursor = e->end;
    }
    if (cursor != data_size)
      fail(detail::concat("tensors cover ", cursor, " bytes of data but the file has ", data_size,
                          " bytes after the header"));
  }

  SafetensorsEntry entry(const std::string& name, const detail::JsonValue& v, std::size_t data_size) const {
    using K = detail::JsonValue::Kind;
    if (v.kind != K::object) fail(detail::concat("entry \"", name, "\" is not an object"));
    SafetensorsEntry e;
    e.name = name;
    const auto* dt = v.member("dtype");
    if (!dt || dt->kind != K::string) fail(detail::concat("tensor \"", name, "\" has no dtype string"));
    const auto parsed = dtype_from_name(dt->text);
    if (!parsed) fail(detail::concat("tensor \"", name, "\" has unknown dtype \"", dt->text, "\""));
    e.dtype = *parsed;
    const auto* shape = v.member("shape");
    if (!shape || shape->kind != K::array) fail(detail::concat("tensor \"", name, "\" has no shape array"));
    std::size_t elements = 1;
    for (const auto& d : shape->items) {
      const auto x = d.as_u64();
      if (!x || *x > (std::uint64_t(1) << 40)) fail(detail::concat("tensor \"", name, "\" has an invalid dimension"));
      e.shape.push_back(std::size_t(*x));
      if (elements > (std::size_t(1) << 48) / std::max<std::size_t>(std::size_t(*x), 1))
        fail(detail::concat("tensor \"", name, "\" is implausibly large"));
      elements *= std::size_t(*x);
    }
    const auto* off = v.member("data_offsets");
    if (!off || off->kind != K::array || off->items.size() != 2)
      fail(detail::concat("tensor \"", name, "\" has no [begin, end] data_offsets"));
    const auto b = off->items[0].as_u64(), en = off->items[1].as_u64();
    if (!b || !en || *b > *en) fail(detail::concat("tensor \"", name, "\" has invalid data_offsets"));
    e.begin = std::size_t(*b);
    e.end = std::size_t(*en);
    const std::size_t expected = elements * dtype_size(e.dtype);
    if (e.end - e.begin != expected)
      fail(detail::concat("tensor \"", name, "\" spans ", e.end - e.begin, " bytes, but ", dtype_name(e.dtype), " x ",
                          elements, " elements need ", expected));
    if (e.end > data_size)
      fail(detail::concat("tensor \"", name, "\" ends at byte ", e.end, " but the data section has ", data_size,
                          " bytes (truncated?)"));
    return e;
  }

  std::filesystem::path path_;
  std::vector<char> bytes_;
  std::size_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Collects tensors and writes them as one safetensors file, atomically.
class SafetensorsWriter {
 public:
  /// Adds a tensor; `data` is copied now, so the caller's memory may change afterwards.
  void add(std::string name, DType dtype, std::vector<std::size_t> shape, const void* data, std::size_t bytes) {
    std::size_t elements = 1;
    for (auto d : shape) elements *= d;
    if (elements * dtype_size(dtype) != bytes)
      throw ValueError(detail::concat("safetensors: tensor \"", name, "\" has ", bytes,
                                      " bytes, its shape and dtype need ", elements * dtype_size(dtype)));
    for (const auto& t : tensors_)
      if (t.name == name) throw ValueError(detail::concat("safetensors: tensor \"", name, "\" added twice"));
    Tensor t{std::move(name), dtype, std::move(shape), data_.size(), data_.size() + bytes};
    const auto* p = static_cast<const char*>(data);
    data_.insert(data_.end(), p, p + bytes);
    tensors_.push_back(std::move(t));
  }
  template <class T>
  void add(std::string name, std::vector<std::size_t> shape, std::span<const T> values) {
    add(std::move(name), dtype_of<T>, std::move(shape), values.data(), values.size_bytes());
  }
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

  /// The header JSON, padded with spaces to a multiple of 8 bytes (as the reference writer does).
  std::string header() const {
    std::string h = "{";
    bool first = true;
    if (!metadata_.empty()) {
      h += "\"__metadata__\":{";
      bool f2 = true;
      for (const auto& [k, v] : metadata_) {
        if (!f2) h += ',';
        h += detail::json_quote(k);
        h += ':';
        h += detail::json_quote(v);
        f2 = false;
      }
      h += "}";
      first = false;
    }
    for (const auto& t : tensors_) {
      // Appends only: GCC 12 reports false -Wrestrict warnings for `"literal" + std::string`.
      if (!first) h += ',';
      h += detail::json_quote(t.name);
      h += ":{\"dtype\":\"";
      h += dtype_name(t.dtype);
      h += "\",\"shape\":[";
      for (std::size_t i = 0; i < t.shape.size(); ++i) {
        if (i) h += ',';
        h += std::to_string(t.shape[i]);
      }
      h += "],\"data_offsets\":[";
      h += std::to_string(t.begin);
      h += ',';
      h += std::to_string(t.end);
      h += "]}";
      first = false;
    }
    h += "}";
    while (h.size() % 8) h += ' ';
    return h;
  }

  /// Writes the file atomically (temp file, fsync, rename).
  void write(const std::filesystem::path& path) const {
    const std::string h = header();
    char len[8];
    std::uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) len[i] = char((n >> (8 * i)) & 0xFF);
    const std::span<const char> parts[] = {{len, 8}, {h.data(), h.size()}, {data_.data(), data_.size()}};
    write_file_atomically(path, parts);
  }

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<std::size_t> shape;
    std::size_t begin, end;
  };
  std::vector<Tensor> tensors_;
  std::vector<char> data_;
  std::map<std::string, std::string> metadata_;
};

} // namespace cohort
