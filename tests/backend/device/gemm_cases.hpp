#pragma once
// The reference GEMM of the device backends (backend/device/gemm.hpp) against plain loops, for
// every transpose combination, batched strides, beta 0 / 1 and a 16-bit input type.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <cohort/precision/half.hpp>

#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
template <class In>
std::vector<double> reference(const device::GemmArgs<In, float>& g, const std::vector<In>& a, const std::vector<In>& b,
                              const std::vector<float>& c) {
  std::vector<double> out(c.begin(), c.end());
  for (std::size_t q = 0; q < g.count; ++q)
    for (std::size_t i = 0; i < g.m; ++i)
      for (std::size_t j = 0; j < g.n; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < g.k; ++p) {
          const double x =
              double(float(g.trans_a ? a[q * g.stride_a + p * g.lda + i] : a[q * g.stride_a + i * g.lda + p]));
          const double y =
              double(float(g.trans_b ? b[q * g.stride_b + j * g.ldb + p] : b[q * g.stride_b + p * g.ldb + j]));
          s += x * y;
        }
        double& o = out[q * g.stride_c + i * g.ldc + j];
        o = double(g.alpha) * s + (g.beta == 0.f ? 0.0 : double(g.beta) * o);
      }
  return out;
}

template <class In>
void check_gemm(bool ta, bool tb, float beta, std::size_t count, std::size_t n = 7) {
  const std::size_t m = 5, k = 9;
  device::GemmArgs<In, float> g{.trans_a = ta,
                                .trans_b = tb,
                                .m = m,
                                .n = n,
                                .k = k,
                                .alpha = 0.5f,
                                .lda = ta ? m + 1 : k + 2,
                                .ldb = tb ? k + 3 : n,
                                .beta = beta,
                                .ldc = n + 1,
                                .count = count};
  g.stride_a = (ta ? k : m) * g.lda;
  g.stride_b = (tb ? n : k) * g.ldb;
  g.stride_c = m * g.ldc + 3;
  std::vector<In> a(count * g.stride_a), b(count * g.stride_b);
  const auto av = random_values(a.size(), 1), bv = random_values(b.size(), 2);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = In(av[i]);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = In(bv[i]);
  std::vector<float> c = random_values(count * g.stride_c, 3);
  if (beta == 0.f) c[0] = std::numeric_limits<float>::quiet_NaN(); // never read
  DeviceBuffer<In> ad, bd;
  DeviceBuffer<float> cd;
  ad.assign_from_host(a.data(), a.size());
  bd.assign_from_host(b.data(), b.size());
  cd.assign_from_host(c.data(), c.size());
  auto gd = g;
  gd.a = ad.data();
  gd.b = bd.data();
  gd.c = cd.data();
  typename Dev::context{}.gemm(gd);
  const auto expected = reference(g, a, b, c);
  const auto actual = cd.to_host();
  for (std::size_t q = 0; q < count; ++q)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t at = q * g.stride_c + i * g.ldc + j;
        CHECK(double(actual[at]) == doctest::Approx(expected[at]).epsilon(1e-5));
      }
  // Elements between rows and matrices (the padding of ldc and stride_c) are left alone.
  CHECK(actual[g.ldc - 1] == c[g.ldc - 1]);
}
} // namespace

TEST_CASE("device GEMM: every transpose combination, beta 0 and 1, batched, float and bfloat16 inputs") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.f, 1.f}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        check_gemm<float>(ta, tb, beta, 1);
        check_gemm<float>(ta, tb, beta, 3);
        check_gemm<bfloat16>(ta, tb, beta, 2);
        check_gemm<float>(ta, tb, beta, 2, 37); // whole and partial column blocks (ThrustDevice: 16 wide)
      }
}
