// CRC32C (io/crc32c.hpp): the published check values, chaining, and the SSE4.2 path equal to
// the portable one on buffers of every small length at every alignment.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include <cohort/io/crc32c.hpp>

using cohort::crc32c;

TEST_CASE("crc32c: known vectors (the CRC catalogue's check value and RFC 3720's test patterns)") {
  const std::string_view check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c(nullptr, 0) == 0u);
  std::vector<unsigned char> b(32, 0x00);
  CHECK(crc32c(b.data(), b.size()) == 0x8A9136AAu);
  b.assign(32, 0xFF);
  CHECK(crc32c(b.data(), b.size()) == 0x62A8AB43u);
  for (unsigned i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(i);
  CHECK(crc32c(b.data(), b.size()) == 0x46DD794Eu);
  for (unsigned i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(31 - i);
  CHECK(crc32c(b.data(), b.size()) == 0x113FDB5Cu);
  // The portable path alone gives the same check value, whatever the CPU.
  CHECK(~cohort::detail::crc32c_update_portable(~0u, reinterpret_cast<const unsigned char*>(check.data()),
                                                check.size()) == 0xE3069283u);
}

TEST_CASE("crc32c: continuing from a previous CRC equals the CRC of the concatenation") {
  std::mt19937 gen(7);
  std::vector<unsigned char> b(1000);
  for (auto& x : b) x = static_cast<unsigned char>(gen());
  const std::uint32_t whole = crc32c(b.data(), b.size());
  for (std::size_t cut : {0, 1, 7, 8, 9, 500, 999, 1000})
    CHECK(crc32c(b.data() + cut, b.size() - cut, crc32c(b.data(), cut)) == whole);
}

TEST_CASE("crc32c: the SSE4.2 instruction path equals the portable tables on odd lengths and alignments") {
#if COHORT_CRC32C_SSE42
  if (!cohort::detail::crc32c_sse42_available()) {
    MESSAGE("this CPU has no SSE4.2: only the portable path exists here");
    return;
  }
  std::mt19937 gen(11);
  std::vector<unsigned char> buf(4096 + 64);
  for (auto& x : buf) x = static_cast<unsigned char>(gen());
  std::size_t compared = 0;
  for (std::size_t align = 0; align < 16; ++align)
    for (std::size_t n : {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 127, 1000, 1023, 4095}) {
      const unsigned char* p = buf.data() + align;
      for (std::uint32_t seed : {0u, 0xFFFFFFFFu, 0x12345678u}) {
        const auto hw = cohort::detail::crc32c_update_sse42(seed, p, n);
        const auto sw = cohort::detail::crc32c_update_portable(seed, p, n);
        if (hw != sw) {
          INFO("length " << n << ", alignment " << align << ", seed " << seed);
          CHECK(hw == sw);
        }
        ++compared;
      }
    }
  CHECK(compared == 16 * 19 * 3);
#else
  MESSAGE("not an x86-64 build: only the portable path exists here");
#endif
}
