// gemm cases (gemm_cases.hpp) on the ThrustDevice backend: the device kernels on Thrust's
// OpenMP system, i.e. on this machine's CPU cores. tests/cuda/ runs the same cases on a GPU.
#include <omp.h>

#include <cmath>
#include <vector>

#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/gemm_cases.hpp"

// ThrustDevice's own GEMM (not cuBLAS): each element summed in order, one product at a time, so
// blocking the columns changes no bit, and no thread count does. Whether the compiler fuses each
// multiply-add into an FMA is its choice per loop: GCC's Zen tuning (avoid_fma_chains) leaves a
// scalar chain unfused and fuses the kernel's vector loop, Sapphire Rapids' tuning fuses both. So
// the sums must equal, bitwise, the in-order loop with every step rounded twice or every step
// fused (any other order of summation matches neither), and be the same for 1 and 2 threads.
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
      std::vector<float> unfused(m * n), fused(m * n);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          float s = 0, f = 0;
          for (std::size_t p = 0; p < k; ++p) {
            const float x = ta ? a[p * g.lda + i] : a[i * g.lda + p];
            const float y = tb ? b[j * g.ldb + p] : b[p * g.ldb + j];
            const volatile float product = x * y; // rounded: the compiler may not fuse it into the add
            s += product;
            f = std::fma(x, y, f);
          }
          unfused[i * n + j] = s;
          fused[i * n + j] = f;
        }
      REQUIRE(unfused != fused); // else the case could not tell the two apart
      cohort::DeviceBuffer<float> ad, bd, cd;
      ad.assign_from_host(a.data(), a.size());
      bd.assign_from_host(b.data(), b.size());
      cd.resize(m * n);
      g.a = ad.data();
      g.b = bd.data();
      g.c = cd.data();
      const int before = omp_get_max_threads();
      std::vector<float> first;
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        Dev::context{}.gemm(g);
        const std::vector<float> c = cd.to_host();
        CHECK((c == unfused || c == fused));
        if (first.empty())
          first = c;
        else
          CHECK(c == first);
      }
      omp_set_num_threads(before);
    }
}
