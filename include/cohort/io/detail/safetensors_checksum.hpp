#pragma once
/// \file
/// cohort's checksums inside a safetensors header (io/safetensors.hpp): the metadata keys and
/// what the header checksum covers.

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

namespace cohort {

/// Metadata key of the header checksum; a tensor's checksum is under this plus "." plus its name.
inline constexpr std::string_view safetensors_crc_key = "cohort.crc32c";

namespace detail {

/// 8 lowercase hex digits.
inline std::string crc_hex(std::uint32_t c) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, c >>= 4) out[std::size_t(i)] = hex[c & 0xF];
  return out;
}

/// Whether `key` is one of the checksum keys ("cohort.crc32c" or "cohort.crc32c.<name>").
inline bool is_crc_key(std::string_view key) noexcept {
  return key.substr(0, safetensors_crc_key.size()) == safetensors_crc_key &&
         (key.size() == safetensors_crc_key.size() || key[safetensors_crc_key.size()] == '.');
}

/// What the header checksum covers, one field after another, each ended by a NUL byte:
/// "metadata", then every metadata key and value except the checksum keys, in byte order of
/// the keys; "tensors", then each tensor's name, dtype name, dimensions (decimal, joined by
/// ','), begin and end offsets (decimal), in byte order of the names.
struct HeaderDigest {
  std::uint32_t crc = 0;
  void field(std::string_view s) {
    crc = crc32c(s.data(), s.size(), crc);
    const char nul = 0;
    crc = crc32c(&nul, 1, crc);
  }
  void tensor(std::string_view name, std::string_view dtype, const std::vector<std::size_t>& shape, std::size_t begin,
              std::size_t end) {
    field(name);
    field(dtype);
    std::string dims;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i) dims += ',';
      dims += std::to_string(shape[i]);
    }
    field(dims);
    field(std::to_string(begin));
    field(std::to_string(end));
  }
};

/// The header checksum of `metadata` and `tensors` (anything with name, dtype, shape, begin and
/// end: the reader's entries and the writer's tensors digest the same way by construction).
template <class Tensors>
std::uint32_t header_digest(const std::map<std::string, std::string>& metadata, const Tensors& tensors) {
  HeaderDigest d;
  d.field("metadata");
  for (const auto& [k, v] : metadata) // std::map: byte order of the keys
    if (!is_crc_key(k)) {
      d.field(k);
      d.field(v);
    }
  d.field("tensors");
  std::vector<const typename Tensors::value_type*> by_name;
  for (const auto& t : tensors) by_name.push_back(&t);
  std::sort(by_name.begin(), by_name.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const auto* t : by_name) d.tensor(t->name, dtype_name(t->dtype), t->shape, t->begin, t->end);
  return d.crc;
}

} // namespace detail

} // namespace cohort
