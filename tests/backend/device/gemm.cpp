// gemm cases (gemm_cases.hpp) on the ThrustDevice backend: the device kernels on Thrust's
// OpenMP system, i.e. on this machine's CPU cores. tests/cuda/ runs the same cases on a GPU.
#include <omp.h>

#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/gemm_cases.hpp"

// ThrustDevice's own GEMM (not cuBLAS): each element summed in order, one product at a time, so
// blocking the columns changes no bit, and no thread count does.
TEST_CASE("device GEMM (Thrust systems): every element is the plain loop's sum, bitwise, for 1 and 2 threads") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const std::size_t m = 6, n = 53, k = 300;
      cohort::device::GemmArgs<float, float> g{.trans_a = ta,
                                               .trans_b = tb,
                                               .m = m,
                                               .n = n,
                                               .k = k,
                                               .alpha = 1,
                                               .lda = ta ? m : k,
                                               .ldb = tb ? k : n,
                                               .beta = 0,
                                               .ldc = n};
      const auto a = cohort::test::random_values(m * k, 4), b = cohort::test::random_values(k * n, 5);
      std::vector<float> expected(m * n);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          float s = 0;
          for (std::size_t p = 0; p < k; ++p) {
            const float x = ta ? a[p * g.lda + i] : a[i * g.lda + p];
            const float y = tb ? b[j * g.ldb + p] : b[p * g.ldb + j];
            s += x * y;
          }
          expected[i * n + j] = 1.f * s;
        }
      cohort::DeviceBuffer<float> ad, bd, cd;
      ad.assign_from_host(a.data(), a.size());
      bd.assign_from_host(b.data(), b.size());
      cd.resize(m * n);
      g.a = ad.data();
      g.b = bd.data();
      g.c = cd.data();
      const int before = omp_get_max_threads();
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        Dev::context{}.gemm(g);
        CHECK(cd.to_host() == expected);
      }
      omp_set_num_threads(before);
    }
}
