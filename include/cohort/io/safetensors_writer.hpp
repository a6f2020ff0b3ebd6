#pragma once
/// \file
/// SafetensorsWriter: collects tensors and writes one safetensors file atomically, with cohort's
/// checksums (the format and its checks: io/safetensors.hpp).

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

namespace cohort {

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
    if (name == "__metadata__") throw ValueError("safetensors: a tensor cannot be called \"__metadata__\"");
    Tensor t{std::move(name), dtype, std::move(shape), data_.size(), data_.size() + bytes};
    const auto* p = static_cast<const char*>(data);
    data_.insert(data_.end(), p, p + bytes);
    tensors_.push_back(std::move(t));
  }
  template <class T>
  void add(std::string name, std::vector<std::size_t> shape, std::span<const T> values) {
    add(std::move(name), dtype_of<T>, std::move(shape), values.data(), values.size_bytes());
  }
  /// Sets a `__metadata__` entry (string to string, as the format allows). The checksum keys
  /// ("cohort.crc32c", "cohort.crc32c.*") are the writer's own: ValueError.
  void set_metadata(std::string key, std::string value) {
    if (detail::is_crc_key(key))
      throw ValueError(detail::concat("safetensors: metadata key \"", key, "\" is reserved for the checksums"));
    metadata_[std::move(key)] = std::move(value);
  }

  /// The header JSON, padded with spaces to a multiple of 8 bytes (as the reference writer does),
  /// with the checksums of every tensor and of the header itself in `__metadata__`.
  std::string header() const {
    std::map<std::string, std::string> metadata = metadata_;
    const std::string header_key(safetensors_crc_key);
    for (const auto& t : tensors_)
      metadata[header_key + "." + t.name] = detail::crc_hex(crc32c(data_.data() + t.begin, t.end - t.begin));
    // The same canonical text SafetensorsFile::header_digest reads back (metadata_ holds no
    // checksum keys: add() refuses them).
    metadata[header_key] = detail::crc_hex(detail::header_digest(metadata_, tensors_));

    std::string h = "{\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      h += detail::json_quote(k);
      h += ':';
      h += detail::json_quote(v);
      first = false;
    }
    h += "}";
    for (const auto& t : tensors_) {
      // Appends only: GCC 12 reports false -Wrestrict warnings for `"literal" + std::string`.
      h += ',';
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
