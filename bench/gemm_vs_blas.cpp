// cohort's GEMM against OpenBLAS on the matrix products the seed models' Linear layers run
// (forward, weight gradient, input gradient at batch 128), one thread each.
//
//   gemm_vs_blas            -> a table and one JSON line per shape
//
// OpenBLAS is held to one thread (openblas_set_num_threads) so both run on the same core. Run it
// once as is and once with OPENBLAS_CORETYPE unset in that command alone, to see OpenBLAS's
// AVX-512 kernel where the environment pins an older one.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cblas.h>

#include "bench_common.hpp"
#include <cohort/backend/cpu/gemm.hpp>

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

namespace {
struct Case {
  const char* what;
  bool ta, tb;
  int m, n, k;
};

template <class F>
double best_seconds(F&& f, int reps) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
} // namespace

int main() {
  cohort::bench::refuse_compile_only_build("gemm_vs_blas");
  openblas_set_num_threads(1);
  const Case cases[] = {
      {"A Linear<4608,64> forward", false, true, 128, 64, 4608},
      {"A Linear<4608,64> dW", true, false, 64, 4608, 128},
      {"A Linear<4608,64> dX", false, false, 128, 4608, 64},
      {"C Linear<6272,64> forward", false, true, 128, 64, 6272},
      {"C Linear<6272,64> dW", true, false, 64, 6272, 128},
      {"D Linear<4608,512> forward", false, true, 128, 512, 4608},
      {"D Linear<4608,512> dW", true, false, 512, 4608, 128},
      {"D Linear<4608,512> dX", false, false, 128, 4608, 512},
      {"D Linear<512,512> forward", false, true, 128, 512, 512},
      {"B Linear<1568,10> forward", false, true, 100, 10, 1568},
  };
  std::printf("OpenBLAS core: %s\n", openblas_get_corename());
  std::printf("%-30s %10s %10s %8s\n", "product (M x N x K)", "cohort", "OpenBLAS", "ratio");
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Case& c : cases) {
    const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
    std::vector<float> a(std::size_t(c.m) * c.k), b(std::size_t(c.k) * c.n), x(std::size_t(c.m) * c.n),
        y(std::size_t(c.m) * c.n);
    for (auto& v : a) v = u(gen);
    for (auto& v : b) v = u(gen);
    const double flops = 2.0 * c.m * c.n * c.k;
    const int reps = std::max(3, int(2e9 / flops));
    const double tc = best_seconds(
        [&] {
          cohort::cpu::gemm(c.ta, c.tb, std::size_t(c.m), std::size_t(c.n), std::size_t(c.k), 1.f, a.data(),
                            std::size_t(lda), b.data(), std::size_t(ldb), 0.f, x.data(), std::size_t(c.n));
        },
        reps);
    const double tb = best_seconds(
        [&] {
          cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans, c.m, c.n, c.k,
                      1.f, a.data(), lda, b.data(), ldb, 0.f, y.data(), c.n);
        },
        reps);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      diff = std::max(diff, double(std::abs(x[i] - y[i])));
      scale = std::max(scale, double(std::abs(y[i])));
    }
    std::printf("%-30s %7.1f GF/s %7.1f GF/s %7.2f   (%dx%dx%d, max diff %.1e of %.1e)\n", c.what, flops / tc / 1e9,
                flops / tb / 1e9, tb / tc, c.m, c.n, c.k, diff, scale);
    std::fprintf(stderr,
                 "{\"product\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"cohort_gflops\": %.1f, "
                 "\"openblas_gflops\": %.1f, \"openblas_core\": \"%s\"}\n",
                 c.what, c.m, c.n, c.k, flops / tc / 1e9, flops / tb / 1e9, openblas_get_corename());
  }
}
