#pragma once
// IDX files built byte by byte for the dataset and IDX reader tests: the big-endian header, a
// recognisable byte pattern, and the file on disk.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

namespace cohort::test {

using Bytes = std::vector<std::uint8_t>;

inline void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
}

/// An IDX file: magic, dims, then `data` (which need not match the dims, to build bad files).
inline Bytes idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& data) {
  Bytes b;
  put_be32(b, magic);
  for (auto d : dims) put_be32(b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

/// Writes `b` to the file `p`. (Not an overload of safetensors_bytes.hpp's write_bytes: a unity
/// batch can see both, and a braced list would then be ambiguous.)
inline void save_bytes(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

/// Writes idx_bytes(magic, dims, data) to `p`; returns `p`.
inline std::filesystem::path write_idx(const std::filesystem::path& p, std::uint32_t magic,
                                       const std::vector<std::uint32_t>& dims, const Bytes& data) {
  save_bytes(p, idx_bytes(magic, dims, data));
  return p;
}

/// `n` bytes that differ from their neighbours (a transposed or shifted read shows).
inline Bytes pattern(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::uint8_t(i * 37 + 11);
  return b;
}

} // namespace cohort::test
