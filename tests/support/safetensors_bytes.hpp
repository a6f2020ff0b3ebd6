#pragma once
// Byte-level helpers for the safetensors, checkpoint and fuzz tests: a file's bytes, its JSON
// header, and a copy with the header edited (to forge corrupt, incomplete or hostile files).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort::test {

inline std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

/// A safetensors file: the 8-byte length, `header`, then `data_bytes` zero bytes.
/// (Sized once and filled with memcpy: vector::insert here trips GCC 12's false -Warray-bounds,
/// PR 105329.)
inline std::vector<char> with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<char> b(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
  if (!header.empty()) std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

/// The JSON header of a safetensors file's bytes.
inline std::string header_of(const std::vector<char>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[std::size_t(i)]);
  return {file.data() + 8, std::size_t(n)};
}

/// Where the data section starts.
inline std::size_t data_start(const std::vector<char>& file) { return 8 + header_of(file).size(); }

/// `file` with `from` replaced by `to` in its header (which must contain it), length updated.
inline std::vector<char> edit_header(const std::vector<char>& file, const std::string& from, const std::string& to) {
  std::string h = header_of(file);
  const auto at = h.find(from);
  if (at == std::string::npos) throw std::logic_error("the header has no " + from + ": " + h);
  h.replace(at, from.size(), to);
  const std::size_t data = file.size() - data_start(file);
  auto out = with_header(h, data);
  if (data) std::memcpy(out.data() + 8 + h.size(), file.data() + data_start(file), data);
  return out;
}

/// The `"key":"value",` text of a metadata entry in a header written by SafetensorsWriter.
inline std::string entry_text(const std::string& header, const std::string& key) {
  const auto at = header.find("\"" + key + "\":");
  if (at == std::string::npos) throw std::logic_error("the header has no key " + key);
  const auto end = header.find('"', header.find(':', at) + 2) + 1;
  return header.substr(at, end - at) + (header[end] == ',' ? "," : "");
}

/// Whether every byte is printable ASCII (what escaped error messages must be).
inline bool printable_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

} // namespace cohort::test
