#pragma once
/// \file
/// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial value and final xor 0xFFFFFFFF):
/// the checksum cohort stores for every tensor of a safetensors file it writes.
/// Example (compiled: tests/docs/headers.cpp, "io/crc32c"):
///
///     std::uint32_t c = cohort::crc32c(bytes.data(), bytes.size());   // crc32c("123456789") == 0xE3069283
///     c = cohort::crc32c(more.data(), more.size(), c);                 // continues: CRC of bytes + more
///
/// Two implementations giving identical results: a portable table-driven one (slicing by 8) and
/// the SSE4.2 `crc32` instruction, chosen at run time when the CPU has it (like the CPU
/// kernels' dispatch in backend/cpu/simd.hpp, with a target attribute, so no -m flag is needed).
/// `COHORT_ISA=generic` in the environment forces the portable one, so the suite's baseline run
/// checks every checkpoint through it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace cohort {

namespace detail {

/// tables[k][b]: the CRC contribution of byte b followed by k zero bytes (slicing by 8).
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc32c_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u))); // reflected polynomial
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
inline constexpr auto crc32c_tables = make_crc32c_tables();

/// Portable CRC32C update of the raw register `crc` (not inverted) over `n` bytes.
inline std::uint32_t crc32c_update_portable(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  const auto& t = crc32c_tables;
  while (n >= 8) {
    // Little-endian assembly by hand: correct on any byte order.
    const std::uint32_t lo =
        crc ^ (std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24);
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
          t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define COHORT_CRC32C_SSE42 1
/// The same update with SSE4.2's crc32 instruction (8 bytes at a time). Only call it where
/// crc32c_sse42_available() is true.
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_update_sse42(std::uint32_t crc, const unsigned char* p,
                                                                           std::size_t n) noexcept {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8); // unaligned loads are fine on x86
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
inline bool crc32c_sse42_available() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return has;
}
#else
#define COHORT_CRC32C_SSE42 0
#endif

/// Whether crc32c() uses the crc32 instruction: available, and not narrowed away by COHORT_ISA.
inline bool crc32c_uses_hardware() noexcept {
#if COHORT_CRC32C_SSE42
  static const bool use = [] {
    const char* env = std::getenv("COHORT_ISA");
    return crc32c_sse42_available() && !(env && std::string_view(env) == "generic");
  }();
  return use;
#else
  return false;
#endif
}

} // namespace detail

/// The CRC32C of `n` bytes at `data`, continuing from `crc`, the CRC32C of what came before (0
/// for a fresh start): crc32c(b, nb, crc32c(a, na)) is the CRC32C of a followed by b.
inline std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
#if COHORT_CRC32C_SSE42
  if (detail::crc32c_uses_hardware()) return ~detail::crc32c_update_sse42(~crc, p, n);
#endif
  return ~detail::crc32c_update_portable(~crc, p, n);
}

} // namespace cohort
