// cohort_cuda_tests: the device test cases on a GPU. Without one it says so and exits with 77,
// which ctest reports as skipped (the binary is still compiled and linked for sm_80 and sm_90).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <cohort/backend/cuda.cuh>

int main(int argc, char** argv) {
  if (cohort::cuda_device_count() == 0) {
    std::puts("SKIP: no CUDA device: cohort_cuda_tests was compiled but cannot run here");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
