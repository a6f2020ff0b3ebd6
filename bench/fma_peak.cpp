// Measures this machine's single-precision FMA peak for 1 thread and for 2 threads, the yardstick
// for the "fraction of peak" column of bench/compare_torch.py and bench/RESULTS.md.
//
//   fma_peak        -> one JSON line: {"gflops_1_thread": ..., "gflops_2_threads": ..., "vector_floats": ...}
//
// The inner loop uses FMA intrinsics: whether a * b + c becomes one FMA otherwise depends on the
// compiler, its language mode and -ffp-contract, and a multiply + add would halve the "peak".
// Run it on an otherwise idle machine (the 2-thread figure needs both cores).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#if defined(__AVX512F__) || defined(__FMA__)
#include "bench_common.hpp"
#include <immintrin.h>
#endif

namespace {
#if defined(__AVX512F__)
constexpr int lanes = 16;
using vec = __m512;
inline vec splat(float v) { return _mm512_set1_ps(v); }
inline vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float first(vec v) { return _mm512_cvtss_f32(v); }
#elif defined(__FMA__)
constexpr int lanes = 8;
using vec = __m256;
inline vec splat(float v) { return _mm256_set1_ps(v); }
inline vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float first(vec v) { return _mm256_cvtss_f32(v); }
#else
// No FMA instructions known at compile time: counts a multiply and an add as one FMA.
constexpr int lanes = 4;
typedef float vec __attribute__((vector_size(lanes * 4)));
inline vec splat(float v) { return vec{} + v; }
inline vec fma(vec a, vec b, vec c) { return a * b + c; }
inline float first(vec v) { return v[0]; }
#endif
constexpr int chains = 24; // independent accumulators: enough to cover latency x FMA ports on current cores

float run(long iters) {
  vec acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = splat(float(i) * 1e-3f);
  const vec a = splat(0.999999f), b = splat(1e-7f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < chains; ++i) acc[i] = fma(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < chains; ++i) s += first(acc[i]);
  return s;
}

/// GFLOP/s (2 per FMA lane) of `threads` threads each running the FMA loop.
double gflops(int threads) {
  const long iters = 20'000'000;
  std::vector<std::thread> ts;
  std::vector<float> sink(std::size_t(threads), 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { sink[std::size_t(t)] = run(iters); });
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float keep = sink[0]; // the results are used, so the loops are not removed
  (void)keep;
  return double(threads) * double(iters) * chains * lanes * 2 / s / 1e9;
}
} // namespace

int main() {
  cohort::bench::refuse_compile_only_build("fma_peak");
  gflops(1); // warm up the clocks
  double best1 = 0, best2 = 0;
  for (int r = 0; r < 3; ++r) {
    best1 = std::max(best1, gflops(1));
    best2 = std::max(best2, gflops(2));
  }
  std::printf("{\"gflops_1_thread\": %.1f, \"gflops_2_threads\": %.1f, \"vector_floats\": %d}\n", best1, best2, lanes);
}
