#pragma once
/// \file
/// Reading and writing the safetensors format (8-byte little-endian header length, a JSON
/// header, then the raw tensor bytes), the format of cohort's checkpoints and test fixtures.
/// Example (compiled: tests/docs/headers.cpp, "io/safetensors"):
///
///     auto f = cohort::SafetensorsFile::read("model.safetensors");   // validates everything
///     std::vector<float> w = f.values<float>("0.weight");
///
///     cohort::SafetensorsWriter out;
///     out.add("0.weight", cohort::DType::f32, {16, 1, 3, 3}, data, bytes);
///     out.write("model.safetensors");   // atomic
///
/// `read` checks the whole file before returning: header length, JSON syntax, dtype names,
/// that every tensor's byte range matches its shape and dtype, lies inside the file, and that
/// the ranges tile the data section with no gap or overlap, and the checksums (below). Errors
/// are FormatError naming the path, the tensor and what was expected and found; text from the
/// file is quoted through detail::escaped.
///
/// Checksums: cohort's extension, kept in the string-to-string `__metadata__` so that Python's
/// safetensors and torch load the files unchanged. SafetensorsWriter always writes
///   "cohort.crc32c.<tensor name>": CRC32C (io/crc32c.hpp) of that tensor's bytes, 8 lowercase
///       hex digits (`crc32c.value(data[begin:end])` in Python's crc32c package);
///   "cohort.crc32c": CRC32C of the rest of the header in a canonical form (detail::HeaderDigest):
///       every other metadata entry, and each tensor's name, dtype, shape and offsets, so a
///       changed dtype, shape or trainer position is caught too.
/// A file holding any of these keys is checksummed, and then all must be right: every tensor has
/// its checksum, every checksum names a tensor, the header checksum is there, every value is 8
/// hex digits and matches. Anything else is a ChecksumError (a FormatError) naming the file, the
/// tensor or the header, and the expected and found CRC, thrown before any value is returned.
/// A file with none of these keys (written by Python's safetensors, or by cohort before
/// checksums) is read unchecked: checksummed() says which.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/detail/json.hpp"
#include "cohort/io/atomic_file.hpp"
#include "cohort/io/crc32c.hpp"
#include "cohort/io/detail/safetensors_checksum.hpp"
#include "cohort/io/safetensors_writer.hpp"

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
  /// The `__metadata__` entries, checksum keys included.
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// Whether the file carries cohort's checksums (then they were all verified by parse/read).
  bool checksummed() const noexcept { return checksummed_; }

  const SafetensorsEntry* find(std::string_view name) const noexcept {
    for (const auto& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  /// The entry called `name`; FormatError if absent.
  const SafetensorsEntry& at(std::string_view name) const {
    if (const auto* e = find(name)) return *e;
    throw FormatError(detail::concat(path_.string(), ": no tensor named ", detail::in_quotes(name)));
  }
  std::span<const char> bytes(const SafetensorsEntry& e) const noexcept {
    return {bytes_.data() + data_start_ + e.begin, e.end - e.begin};
  }
  /// The values of tensor `name` as `T`; FormatError if its dtype is not T's.
  template <class T>
  std::vector<T> values(std::string_view name) const {
    const auto& e = at(name);
    if (e.dtype != dtype_of<T>)
      throw FormatError(detail::concat(path_.string(), ": tensor ", detail::in_quotes(name), " has dtype ",
                                       dtype_name(e.dtype), ", expected ", dtype_name(dtype_of<T>)));
    std::vector<T> out(e.elements());
    std::memcpy(out.data(), bytes_.data() + data_start_ + e.begin, e.end - e.begin);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(path_.string() + ": " + what); }
  [[noreturn]] void fail_checksum(const std::string& what) const { throw ChecksumError(path_.string() + ": " + what); }

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
      // The bytes around the problem, escaped: they may be anything.
      const std::size_t from = e.offset > 16 ? e.offset - 16 : 0;
      fail(detail::concat("header is not valid JSON (", e.what, " at byte ", e.offset, " of the header, near ",
                          detail::in_quotes(header.substr(from, 32)), ")"));
    }
    if (root.kind != detail::JsonValue::Kind::object) fail("header is not a JSON object");

    const std::size_t data_size = bytes_.size() - data_start_;
    bool seen_metadata = false;
    for (const auto& [name, v] : root.members) {
      if (name == "__metadata__") {
        if (seen_metadata) fail("__metadata__ appears twice");
        seen_metadata = true;
        if (v.kind != detail::JsonValue::Kind::object) fail("__metadata__ is not an object");
        for (const auto& [k, s] : v.members) {
          if (s.kind != detail::JsonValue::Kind::string)
            fail(detail::concat("__metadata__ value of ", detail::in_quotes(k), " is not a string"));
          // A repeated key would make the file mean different things to different readers.
          if (!metadata_.emplace(k, s.text).second)
            fail(detail::concat("__metadata__ key ", detail::in_quotes(k), " appears twice"));
        }
        continue;
      }
      if (find(name)) fail(detail::concat("tensor ", detail::in_quotes(name), " appears twice"));
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
        fail(detail::concat("tensor ", detail::in_quotes(e->name), " starts at byte ", e->begin,
                            " of the data section, expected ", cursor,
                            e->begin < cursor ? " (it overlaps the previous tensor)" : " (there is a gap)"));
      cursor = e->end;
    }
    if (cursor != data_size)
      fail(detail::concat("tensors cover ", cursor, " bytes of data but the file has ", data_size,
                          " bytes after the header"));
    verify_checksums();
  }

  /// The checksum stored under `key`: exactly 8 lowercase hex digits, as the writer writes them
  /// (so that a flipped case bit is caught too).
  std::uint32_t stored_crc(const std::string& key, const std::string& value) const {
    std::uint32_t v = 0;
    const bool ok = value.size() == 8 && std::all_of(value.begin(), value.end(), [](char c) {
                      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                    });
    if (!ok)
      fail_checksum(detail::concat("metadata ", detail::in_quotes(key), " is ", detail::in_quotes(value),
                                   ", expected a CRC32C as 8 lowercase hex digits"));
    std::from_chars(value.data(), value.data() + value.size(), v, 16);
    return v;
  }

  /// Checks cohort's checksums (see the file comment) if the file has any.
  void verify_checksums() {
    const std::string header_key(safetensors_crc_key);
    const std::string prefix = header_key + ".";
    std::map<std::string_view, std::uint32_t> tensor_crcs; // by tensor name
    std::optional<std::uint32_t> header_crc;
    for (const auto& [k, v] : metadata_) {
      if (!detail::is_crc_key(k)) continue;
      const std::uint32_t c = stored_crc(k, v);
      if (k == header_key)
        header_crc = c;
      else
        tensor_crcs.emplace(std::string_view(k).substr(prefix.size()), c);
    }
    checksummed_ = header_crc || !tensor_crcs.empty();
    if (!checksummed_) return; // a plain safetensors file (Python's, or an older cohort's)

    if (!header_crc)
      fail_checksum(detail::concat("has tensor checksums (", prefix, "*) but no header checksum (", header_key,
                                   "): the header was changed after cohort wrote it"));
    const std::uint32_t found_header = header_digest();
    if (found_header != *header_crc)
      fail_checksum(detail::concat("header checksum mismatch: expected CRC32C ", detail::crc_hex(*header_crc), " (",
                                   header_key, "), found ", detail::crc_hex(found_header),
                                   ": a tensor name, dtype, shape or offset, or a metadata entry, was changed after "
                                   "cohort wrote the file"));
    for (const auto& [name, c] : tensor_crcs)
      if (!find(name))
        fail_checksum(detail::concat("metadata ", detail::in_quotes(prefix + std::string(name)),
                                     " is the checksum of a tensor the file does not hold"));
    for (const auto& e : entries_) {
      const auto it = tensor_crcs.find(e.name);
      if (it == tensor_crcs.end())
        fail_checksum(detail::concat("tensor ", detail::in_quotes(e.name), " has no checksum (",
                                     detail::in_quotes(prefix + e.name), ") though the file carries checksums"));
      const auto data = bytes(e);
      const std::uint32_t found = crc32c(data.data(), data.size());
      if (found != it->second)
        fail_checksum(detail::concat("tensor ", detail::in_quotes(e.name), ": checksum mismatch: expected CRC32C ",
                                     detail::crc_hex(it->second), ", found ", detail::crc_hex(found), " over its ",
                                     data.size(), " bytes (at data offsets ", e.begin, "..", e.end,
                                     "): the tensor's data is corrupt"));
    }
  }

  /// The header checksum of this file as read (see detail::HeaderDigest).
  std::uint32_t header_digest() const { return detail::header_digest(metadata_, entries_); }

  SafetensorsEntry entry(const std::string& name, const detail::JsonValue& v, std::size_t data_size) const {
    using K = detail::JsonValue::Kind;
    const std::string q = detail::in_quotes(name);
    if (v.kind != K::object) fail(detail::concat("entry ", q, " is not an object"));
    SafetensorsEntry e;
    e.name = name;
    const auto* dt = v.member("dtype");
    if (!dt || dt->kind != K::string) fail(detail::concat("tensor ", q, " has no dtype string"));
    const auto parsed = dtype_from_name(dt->text);
    if (!parsed) fail(detail::concat("tensor ", q, " has unknown dtype ", detail::in_quotes(dt->text)));
    e.dtype = *parsed;
    const auto* shape = v.member("shape");
    if (!shape || shape->kind != K::array) fail(detail::concat("tensor ", q, " has no shape array"));
    std::size_t elements = 1;
    for (const auto& d : shape->items) {
      const auto x = d.as_u64();
      if (!x || *x > (std::uint64_t(1) << 40)) fail(detail::concat("tensor ", q, " has an invalid dimension"));
      e.shape.push_back(std::size_t(*x));
      if (elements > (std::size_t(1) << 48) / std::max<std::size_t>(std::size_t(*x), 1))
        fail(detail::concat("tensor ", q, " is implausibly large"));
      elements *= std::size_t(*x);
    }
    const auto* off = v.member("data_offsets");
    if (!off || off->kind != K::array || off->items.size() != 2)
      fail(detail::concat("tensor ", q, " has no [begin, end] data_offsets"));
    const auto b = off->items[0].as_u64(), en = off->items[1].as_u64();
    if (!b || !en || *b > *en) fail(detail::concat("tensor ", q, " has invalid data_offsets"));
    e.begin = std::size_t(*b);
    e.end = std::size_t(*en);
    const std::size_t expected = elements * dtype_size(e.dtype);
    if (e.end - e.begin != expected)
      fail(detail::concat("tensor ", q, " spans ", e.end - e.begin, " bytes, but ", dtype_name(e.dtype), " x ",
                          elements, " elements need ", expected));
    if (e.end > data_size)
      fail(detail::concat("tensor ", q, " ends at byte ", e.end, " but the data section has ", data_size,
                          " bytes (truncated?)"));
    return e;
  }

  std::filesystem::path path_;
  std::vector<char> bytes_;
  std::size_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  bool checksummed_ = false;
};

} // namespace cohort
