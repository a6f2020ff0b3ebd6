#pragma once
/// \file
/// Reading IDX files of unsigned bytes (the MNIST / Fashion-MNIST format), raw or gzip-compressed.
/// Example (compiled: tests/docs/headers.cpp, "data/idx"):
///
///     auto images = cohort::read_idx("train-images-idx3-ubyte.gz", cohort::idx_images_magic);
///     // images.dims == {60000, 28, 28}, images.values.size() == 47040000
///
/// The format: a big-endian 32-bit magic 0x000008NN (0x08: unsigned bytes, NN: the number of
/// dimensions), NN big-endian 32-bit dimensions, then the bytes in row-major order. A file whose
/// first two bytes are gzip's magic (1f 8b) is decompressed first; a raw IDX file starts with
/// 00 00, so the two cannot be confused.
///
/// Everything is checked before values are returned: the magic, every dimension (at least 1,
/// product at most `idx_max_data_bytes`), and that the (decompressed) size is exactly the header
/// plus the product of the dimensions. Decompression stops as soon as the output outgrows what
/// the header promises, so a small hostile .gz cannot exhaust memory. Problems are `IoError`
/// (cannot open or read) or `FormatError` (content), the message starting with the path.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <zlib.h>

#include "cohort/core/error.hpp"

namespace cohort {

/// Magic of an IDX image file: unsigned bytes, 3 dimensions (N, H, W).
inline constexpr std::uint32_t idx_images_magic = 0x00000803; // 2051
/// Magic of an IDX label file: unsigned bytes, 1 dimension (N).
inline constexpr std::uint32_t idx_labels_magic = 0x00000801; // 2049

/// Largest data section accepted (2^31 bytes, 45x the Fashion-MNIST training images): a bound
/// that keeps a corrupt header from asking for absurd allocations.
inline constexpr std::uint64_t idx_max_data_bytes = std::uint64_t(1) << 31;

/// An IDX file's content: its dimensions and its bytes, row-major.
///
///     IdxArray a = read_idx(path, idx_labels_magic);   // a.dims == {N}, a.values[i] is label i
struct IdxArray {
  std::filesystem::path path; // where it was read from (named in later error messages)
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> values; // product(dims) bytes
};

namespace detail {

/// Longest possible header: the magic and 255 dimensions.
inline constexpr std::size_t idx_max_header_bytes = 4 + 4 * 255;
/// Largest file read at all: the largest valid raw file plus room for gzip's stored-block
/// overhead (5 bytes per 64 KiB), so the check never rejects a valid file.
inline constexpr std::uint64_t idx_max_file_bytes = idx_max_data_bytes + (std::uint64_t(1) << 26);
/// How far decompressed output may outgrow the header's promise before reading stops; the
/// exact size is reported for smaller excesses.
inline constexpr std::size_t idx_gzip_margin = std::size_t(1) << 20;

inline std::uint32_t read_be32(const std::uint8_t* p) noexcept {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | std::uint32_t(p[3]);
}

/// "IDX images: unsigned bytes, 3 dimensions": what a magic number means, for error messages.
inline std::string idx_magic_description(std::uint32_t magic) {
  if (magic == idx_images_magic) return "IDX images: unsigned bytes, 3 dimensions";
  if (magic == idx_labels_magic) return "IDX labels: unsigned bytes, 1 dimension";
  if ((magic >> 16) != 0) {
    static const char hex[] = "0123456789ABCDEF";
    std::string h = "0x";
    for (int s = 28; s >= 0; s -= 4) h += hex[(magic >> s) & 0xF];
    return h + ": not an IDX file, whose magic starts with two zero bytes";
  }
  const unsigned type = (magic >> 8) & 0xFF, n = magic & 0xFF;
  std::string t;
  switch (type) {
  case 0x08:
    t = "unsigned bytes";
    break;
  case 0x09:
    t = "signed bytes";
    break;
  case 0x0B:
    t = "16-bit integers";
    break;
  case 0x0C:
    t = "32-bit integers";
    break;
  case 0x0D:
    t = "floats";
    break;
  case 0x0E:
    t = "doubles";
    break;
  default:
    t = concat("unknown element type ", type);
    break;
  }
  return concat("IDX ", t, ", ", n, n == 1 ? " dimension" : " dimensions");
}

/// "60000x28x28".
inline std::string idx_dims_string(std::span<const std::size_t> dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

/// A validated header: dimensions, header length and the number of data bytes it promises.
struct IdxHeader {
  std::vector<std::size_t> dims;
  std::size_t header_bytes = 0;
  std::size_t data_bytes = 0;

  std::size_t total_bytes() const noexcept { return header_bytes + data_bytes; }
  /// "the header promises 60000x28x28 = 47040000 bytes of data after 16 header bytes".
  std::string promise() const {
    return concat("the header promises ", idx_dims_string(dims), dims.size() > 1 ? concat(" = ", data_bytes) : "",
                  " bytes of data after ", header_bytes, " header bytes");
  }
};

[[noreturn]] inline void idx_fail(const std::filesystem::path& path, const std::string& what) {
  throw FormatError(concat(path.string(), ": ", what));
}

/// Parses the header at the start of `bytes`. With `complete` false, `bytes` may be a prefix of
/// the content and nullopt means "need more bytes"; with `complete` true a short file is an error.
/// Throws FormatError as soon as what is there is wrong, so decompression can stop early.
inline std::optional<IdxHeader> parse_idx_header(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                                                 std::uint32_t expected_magic, bool complete, const char* suffix) {
  if (bytes.size() < 4) {
    if (!complete) return std::nullopt;
    idx_fail(path, concat("file is ", bytes.size(), bytes.size() == 1 ? " byte" : " bytes", suffix,
                          ", too short for the 4-byte IDX magic"));
  }
  const std::uint32_t magic = read_be32(bytes.data());
  if (magic != expected_magic)
    idx_fail(path, concat("expected magic ", expected_magic, " (", idx_magic_description(expected_magic), "), found ",
                          magic, " (", idx_magic_description(magic), ")"));
  const std::size_t rank = magic & 0xFF;
  IdxHeader h;
  h.header_bytes = 4 + 4 * rank;
  if (bytes.size() < h.header_bytes) {
    if (!complete) return std::nullopt;
    idx_fail(path, concat("truncated: file has ", bytes.size(), " bytes", suffix, ", the IDX header of ", rank,
                          rank == 1 ? " dimension" : " dimensions", " needs ", h.header_bytes));
  }
  std::uint64_t product = 1;
  for (std::size_t i = 0; i < rank; ++i) h.dims.push_back(read_be32(bytes.data() + 4 + 4 * i));
  for (std::size_t i = 0; i < rank; ++i) {
    if (h.dims[i] == 0)
      idx_fail(path, concat("header dimensions ", idx_dims_string(h.dims), ": dimension ", i + 1,
                            " is 0, every dimension must be at least 1"));
    // product <= 2^31 and a dimension < 2^32 keep this multiplication inside 64 bits.
    product *= h.dims[i];
    if (product > idx_max_data_bytes)
      idx_fail(path, concat("header dimensions ", idx_dims_string(h.dims), " promise more than ", idx_max_data_bytes,
                            " bytes of data, the most this reader accepts (corrupt header?)"));
  }
  h.data_bytes = std::size_t(product);
  return h;
}

/// Checks that `bytes` is exactly one IDX file and moves its data into an IdxArray.
inline IdxArray parse_idx_content(const std::filesystem::path& path, std::vector<std::uint8_t> bytes,
                                  std::uint32_t expected_magic, const char* suffix) {
  const IdxHeader h = *parse_idx_header(path, bytes, expected_magic, true, suffix);
  const std::size_t data = bytes.size() - h.header_bytes;
  if (data < h.data_bytes) idx_fail(path, concat("truncated: ", h.promise(), ", the file has ", data, suffix));
  if (data > h.data_bytes) idx_fail(path, concat("trailing data: ", h.promise(), ", the file has ", data, suffix));
  bytes.erase(bytes.begin(), bytes.begin() + std::ptrdiff_t(h.header_bytes));
  return IdxArray{path, h.dims, std::move(bytes)};
}

inline bool is_gzip(std::span<const std::uint8_t> bytes) noexcept {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

/// Decompresses a gzip file holding one IDX file, checking the IDX header as soon as it has been
/// decompressed and stopping once the output exceeds what it promises by `idx_gzip_margin`.
/// Concatenated gzip members (as `cat a.gz b.gz` makes) are decompressed in turn, like gzip does;
/// anything else after the last member is an error.
inline std::vector<std::uint8_t> gunzip_idx(const std::filesystem::path& path, std::span<const std::uint8_t> in,
                                            std::uint32_t expected_magic) {
  z_stream zs{};
  // 15 + 32: the largest window, and detect a gzip (or zlib) header and check its trailer.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw IoError(concat(path.string(), ": cannot initialise zlib"));
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};

  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(std::size_t(1) << 18);
  std::optional<IdxHeader> header;
  std::size_t limit = 0; // valid once the header is known
  std::size_t consumed = 0;
  constexpr std::size_t max_feed = std::size_t(1) << 30; // avail_in is a 32-bit uInt
  auto zlib_message = [&](int rc) { return std::string(zs.msg ? zs.msg : zError(rc)); };

  for (;;) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      const std::size_t n = std::min(in.size() - consumed, max_feed);
      zs.next_in = const_cast<Bytef*>(in.data() + consumed); // zlib's API is not const-correct
      zs.avail_in = uInt(n);
      consumed += n;
    }
    zs.next_out = chunk.data();
    zs.avail_out = uInt(chunk.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t produced = chunk.size() - zs.avail_out;
    if (header && out.size() + produced > limit)
      idx_fail(path, concat("trailing data: ", header->promise(), ", the file has at least ",
                            out.size() + produced - header->header_bytes, " (decompressed; stopped reading there)"));
    out.insert(out.end(), chunk.begin(), chunk.begin() + std::ptrdiff_t(produced));
    if (!header) {
      header = parse_idx_header(path, out, expected_magic, false, " (decompressed)");
      if (header) {
        limit = header->total_bytes() + idx_gzip_margin;
        // deflate cannot compress better than 1032:1, so this never reserves more than the
        // input could produce, and at most what a valid file needs.
        out.reserve(std::min<std::size_t>(header->total_bytes(), 1032 * in.size() + 64));
      }
    }
    if (rc == Z_STREAM_END) {
      const std::size_t next = consumed - zs.avail_in; // first byte inflate has not used
      const std::size_t left = in.size() - next;
      if (left == 0) break;
      if (is_gzip(in.subspan(next))) {
        inflateReset(&zs); // another gzip member follows
        continue;
      }
      idx_fail(path, concat("gzip: ", left, left == 1 ? " byte" : " bytes",
                            " of trailing garbage after the end of the compressed data"));
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == in.size())
      idx_fail(path, concat("truncated gzip stream: the input ends before the end of the compressed data (", out.size(),
                            " bytes decompressed",
                            header ? concat(", the IDX header promises ", header->total_bytes(), " in all") : "", ")"));
    if (rc == Z_DATA_ERROR) idx_fail(path, concat("corrupt gzip data (zlib: ", zlib_message(rc), ")"));
    if (rc == Z_NEED_DICT) idx_fail(path, "gzip: compressed with a preset dictionary, which IDX files never use");
    if (rc == Z_MEM_ERROR) throw IoError(concat(path.string(), ": zlib ran out of memory"));
    throw IoError(concat(path.string(), ": zlib failed (", zlib_message(rc), ")"));
  }
  return out;
}

/// The whole file, with its size checked before anything is allocated.
inline std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(concat(path.string(), ": cannot open for reading (", ec.message(), ")"));
  if (size > idx_max_file_bytes)
    throw FormatError(concat(path.string(), ": file is ", size, " bytes, more than any IDX file this reader accepts (",
                             idx_max_file_bytes, ")"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(concat(path.string(), ": cannot open for reading"));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  if (std::uintmax_t(in.gcount()) != size)
    throw IoError(concat(path.string(), ": read failed after ", in.gcount(), " of ", size, " bytes"));
  return bytes;
}

} // namespace detail

/// Parses `bytes` as the content of the IDX file `path` (named in errors only), decompressing
/// it first if it is gzip. `expected_magic` must be an unsigned-byte magic (0x000008NN).
///
///     IdxArray a = parse_idx("mem.idx", std::move(bytes), idx_labels_magic);
inline IdxArray parse_idx(const std::filesystem::path& path, std::vector<std::uint8_t> bytes,
                          std::uint32_t expected_magic) {
  if ((expected_magic & 0xFFFFFF00u) != 0x00000800u)
    throw ValueError(detail::concat("read_idx: expected magic ", expected_magic, " (",
                                    detail::idx_magic_description(expected_magic),
                                    ") is not an IDX magic of unsigned bytes (0x000008NN)"));
  if (detail::is_gzip(bytes))
    return detail::parse_idx_content(path, detail::gunzip_idx(path, bytes, expected_magic), expected_magic,
                                     " (decompressed)");
  return detail::parse_idx_content(path, std::move(bytes), expected_magic, "");
}

/// Reads and validates an IDX file of unsigned bytes, raw or gzip-compressed.
///
///     IdxArray labels = read_idx(dir / "train-labels-idx1-ubyte.gz", idx_labels_magic);
inline IdxArray read_idx(const std::filesystem::path& path, std::uint32_t expected_magic) {
  return parse_idx(path, detail::read_file_bytes(path), expected_magic);
}

} // namespace cohort
