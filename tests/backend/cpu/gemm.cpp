#include <doctest/doctest.h>

#include <cstddef>
#include <random>
#include <vector>

#include <cohort/backend/cpu/gemm.hpp>

using namespace cohort;

namespace {
template <class T>
void check_gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, T beta) {
  std::mt19937 gen(unsigned(m * 131 + n * 17 + k));
  std::uniform_real_distribution<double> u(-1, 1);
  // Padded leading dimensions catch stride mistakes.
  const std::size_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
  std::vector<T> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc), ref;
  for (auto& v : a) v = T(u(gen));
  for (auto& v : b) v = T(u(gen));
  for (auto& v : c) v = T(u(gen));
  ref = c;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p)
        s += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
      ref[i * ldc + j] = T(double(alpha) * s + (beta == T(0) ? 0.0 : double(beta) * double(ref[i * ldc + j])));
    }
  cpu::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  double worst = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      worst = std::max(worst, std::abs(double(c[i * ldc + j]) - double(ref[i * ldc + j])));
  for (std::size_t i = 0; i < m; ++i) // padding columns untouched
    for (std::size_t j = n; j < ldc; ++j) REQUIRE(c[i * ldc + j] == ref[i * ldc + j]);
  INFO("ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k << " worst " << worst);
  CHECK(worst < (sizeof(T) == 4 ? 1e-4 * double(k + 1) / 16 : 1e-12 * double(k + 1)));
}
} // namespace

TEST_CASE("gemm: every transpose, odd sizes, beta 0 and 1, float and double") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [m, n, k] : {std::array<std::size_t, 3>{1, 1, 1},
                             {7, 5, 3},
                             {13, 37, 29},
                             {75, 130, 300},
                             {6, 16, 256},
                             {8, 512, 4608},
                             {40, 1100, 600},
                             {256, 49, 1152},
                             {8, 10, 512}}) {
        check_gemm<float>(ta, tb, m, n, k, 1.f, 0.f);
        check_gemm<float>(ta, tb, m, n, k, 0.5f, 1.f);
        check_gemm<double>(ta, tb, m, n, k, 1.0, 1.0);
      }
}

TEST_CASE("gemm: beta 0 ignores NaN in C") {
  std::vector<float> a{1, 2}, b{3, 4}, c{std::numeric_limits<float>::quiet_NaN()};
  cpu::gemm(false, false, 1, 1, 2, 1.f, a.data(), 2, b.data(), 1, 0.f, c.data(), 1);
  CHECK(c[0] == 11.f);
}
