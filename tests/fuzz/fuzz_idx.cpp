// libFuzzer target: parse_idx on raw bytes, as an image file and as a label file. The input may
// be a raw IDX file or gzip (the reader decides by the first two bytes), so corrupt compressed
// streams are fuzzed here; fuzz_idx_gzip.cpp compresses valid streams. Every rejection must be a
// cohort::Error, and what is accepted must be consistent.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cohort/data/idx.hpp>

using namespace cohort;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const std::uint32_t magic : {idx_images_magic, idx_labels_magic}) {
    try {
      const IdxArray a = parse_idx("fuzz.idx", std::vector<std::uint8_t>(data, data + size), magic);
      std::size_t n = 1;
      for (const auto d : a.dims) n *= d;
      if (a.dims.size() != (magic & 0xFF) || n != a.values.size()) __builtin_trap();
    } catch (const Error&) {
    }
  }
  return 0;
}
