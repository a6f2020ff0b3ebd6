// cohort::half and cohort::bfloat16 in CUDA device code, with the bits of CUDA's own types.
// Part of cohort_cuda_tests: compiled by nvcc wherever the toolkit is installed.
#include <cohort/precision/half.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static_assert(sizeof(cohort::half) == sizeof(__half) && alignof(cohort::half) <= alignof(__half));
static_assert(sizeof(cohort::bfloat16) == sizeof(__nv_bfloat16));

__global__ void round_trip(const float* x, cohort::half* h, cohort::bfloat16* b, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[i] = cohort::half(x[i]);
  b[i] = cohort::bfloat16(x[i]);
  y[i] = float(h[i]) + float(b[i]);
}

// The conversions are constexpr on the host and in device code alike.
static_assert(cohort::half(1.f).bits == 0x3C00u && cohort::bfloat16(1.f).bits == 0x3F80u);
