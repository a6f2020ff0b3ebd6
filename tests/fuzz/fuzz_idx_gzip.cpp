// libFuzzer target: the gzip path of parse_idx on valid compressed streams. The first input byte
// picks the compression level and whether a second gzip member or trailing bytes follow; the
// rest is the (decompressed) IDX content, so the fuzzer explores headers, sizes and the early
// stop of the decompressor rather than broken deflate blocks (fuzz_idx.cpp has those).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <zlib.h>

#include <cohort/data/idx.hpp>

using namespace cohort;

namespace {
/// `in` as one gzip member at `level`.
std::vector<std::uint8_t> gzip(const std::uint8_t* in, std::size_t n, int level) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::vector<std::uint8_t> out(deflateBound(&zs, uLong(n)) + 32);
  zs.next_in = const_cast<Bytef*>(in);
  zs.avail_in = uInt(n);
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::uint8_t* content = data + 1;
  std::size_t n = size - 1;
  // Bit 4: split the content into two gzip members (as `cat a.gz b.gz` makes).
  const std::size_t split = (mode & 0x10) ? n / 2 : n;
  std::vector<std::uint8_t> file = gzip(content, split, mode % 10);
  if (split < n) {
    const auto second = gzip(content + split, n - split, mode % 10);
    file.insert(file.end(), second.begin(), second.end());
  }
  if (mode & 0x20) file.push_back(0); // one byte of trailing garbage
  for (const std::uint32_t magic : {idx_images_magic, idx_labels_magic}) {
    try {
      const IdxArray a = parse_idx("fuzz.idx.gz", file, magic);
      std::size_t count = 1;
      for (const auto d : a.dims) count *= d;
      if (a.dims.size() != (magic & 0xFF) || count != a.values.size()) __builtin_trap();
      if (mode & 0x20) __builtin_trap(); // trailing garbage must be refused
    } catch (const Error&) {
    }
  }
  return 0;
}
