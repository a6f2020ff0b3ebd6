#pragma once
// Gradients that exercise 16-bit rounding (gradient compression's tests): ordinary values, ties
// (1 + 1/256 is a bf16 tie), values below fp16's smallest subnormal and above its largest finite
// value. Deterministic in `seed`.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cohort::test {

inline std::vector<float> awkward_gradients(std::size_t n, std::uint32_t seed) {
  std::vector<float> g(n);
  std::uint32_t s = seed;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float u = float(s >> 8) / float(1u << 24) - 0.5f;
    g[i] = i % 97 == 0 ? 2e5f * u : i % 89 == 0 ? 1e-9f * u : i % 83 == 0 ? 1.0f + 1.0f / 256 : 1e-2f * u;
  }
  return g;
}

} // namespace cohort::test
