// Measures this machine's single-precision FMA peak per core (and for 2 threads), the yardstick
// for the "fraction of peak" column in bench/RESULTS.md.
//
//   fma_peak        -> one JSON line: {"gflops_1_thread": ..., "gflops_2_threads": ..., "isa": ...}

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>



namespace {
#if defined(__AVX512F__)
constexpr int lanes = 16;
#elif defined(__AVX2__)
constexpr int lanes = 8;
#else
constexpr int lanes = 4;
#endif
typedef float vec __attribute__((vector_size(lanes * 4)));

/// 2 x 12 independent FMA chains: enough to cover latency x throughput on current cores.
double run(long iters) {
  vec acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = vec{} + float(i) * 1e-3f;
  const vec a = vec{} + 0.999999f, b = vec{} + 1e-7f;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = acc[i] * a + b;
  }
  float s = 0;
  for (int i = 0; i < 24; ++i) s += acc[i][0];
  return s;
}

double gflops(int threads) {
  const long iters = 20'000'000;
  std::vector<std::thread> ts;
  volatile double sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) ts.emplace_back([&] { sink = sink + run(iters); });
  for (auto& t : ts) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(threads) * double(iters) * 24 * lanes * 2 / s / 1e9;
}
} // namespace

int main() {
  gflops(1);  // warm up the clocks
  double best1 = 0, best2 = 0;
  for (int r = 0; r < 3; ++r) {
    best1 = std::max(best1, gflops(1));
    best2 = std::max(best2, gflops(2));
  }
  std::printf("{\"gflops_1_thread\": %.1f, \"gflops_2_threads\": %.1f, \"vector_floats\": %d}\n", best1, best2, lanes);
}
