#pragma once
/// \file
/// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
/// Example (compiled: tests/docs/headers.cpp, "core/random"):
///
///     cohort::RandomStream s{/*seed=*/42, /*stream=*/7};
///     float u = s.uniform(123);   // the 123rd number of that stream, in [0, 1)
///
/// A counter-based generator is a pure function of (seed, stream, index). The value a thread
/// draws depends only on which element it is computing, never on how work was split between
/// threads, ranks or replicas: dropout masks and initial weights are the same for any thread
/// count or world size, and the "RNG state" in a checkpoint is two integers.

#include <array>
#include <cstdint>

#include "cohort/core/macros.hpp"

namespace cohort {

/// One Philox4x32-10 block: 4 random words from a 128-bit counter and a 64-bit key.
COHORT_HOST_DEVICE constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> ctr,
                                                                        std::array<std::uint32_t, 2> key) noexcept {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { // the key schedule bumps before every round but the first
      key[0] += w0;
      key[1] += w1;
    }
    const std::uint64_t p0 = std::uint64_t{m0} * ctr[0];
    const std::uint64_t p1 = std::uint64_t{m1} * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
  }
  return ctr;
}

/// Maps 32 random bits to a float uniform in [0, 1) with 24 bits of resolution (exact).
COHORT_HOST_DEVICE constexpr float bits_to_unit_float(std::uint32_t bits) noexcept {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

/// An indexable stream of random numbers: element `i` of stream `stream` under `seed`.
struct RandomStream {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;

  /// Philox block `block` (elements 4*block .. 4*block+3).
  COHORT_HOST_DEVICE constexpr std::array<std::uint32_t, 4> block(std::uint64_t block) const noexcept {
    return philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                          static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                         {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  }
  /// 32 random bits for element `index`.
  COHORT_HOST_DEVICE constexpr std::uint32_t bits(std::uint64_t index) const noexcept {
    return block(index >> 2)[index & 3];
  }
  /// Uniform in [0, 1) for elements 4*block .. 4*block+3 (one Philox evaluation for four).
  COHORT_HOST_DEVICE constexpr std::array<float, 4> uniform4(std::uint64_t block_index) const noexcept {
    const auto b = block(block_index);
    return {bits_to_unit_float(b[0]), bits_to_unit_float(b[1]), bits_to_unit_float(b[2]), bits_to_unit_float(b[3])};
  }
  /// Uniform in [0, 1) for element `index`.
  COHORT_HOST_DEVICE constexpr float uniform(std::uint64_t index) const noexcept {
    return bits_to_unit_float(bits(index));
  }
};

/// Stream identifiers, so that no two uses of the generator ever share numbers.
namespace streams {
/// Initial value of parameter tensor `ordinal` (its position in state_dict order).
constexpr std::uint64_t init(std::uint64_t ordinal) noexcept { return (std::uint64_t{1} << 62) | ordinal; }
/// Dropout masks of layer `layer` during training forward pass number `step`.
constexpr std::uint64_t dropout(std::uint64_t layer, std::uint64_t step) noexcept {
  return (std::uint64_t{2} << 62) | (layer << 40) | (step & ((std::uint64_t{1} << 40) - 1));
}
/// Data shuffling for epoch `epoch`.
constexpr std::uint64_t shuffle(std::uint64_t epoch) noexcept { return (std::uint64_t{3} << 62) | epoch; }
/// Data augmentation (data/augment.hpp): transform number `position` (< 256) of the pipeline
/// applied to dataset sample `sample` (< 2^36) in epoch `epoch` (taken modulo 2^17). Kind 0 with
/// bit 61 set, so no init, dropout or shuffle stream (kinds 1-3) is ever one of these.
constexpr std::uint64_t augment(std::uint64_t epoch, std::uint64_t sample, std::uint64_t position) noexcept {
  return (std::uint64_t{1} << 61) | ((position & 0xFF) << 53) | ((epoch & ((std::uint64_t{1} << 17) - 1)) << 36) |
         (sample & ((std::uint64_t{1} << 36) - 1));
}
} // namespace streams

} // namespace cohort
