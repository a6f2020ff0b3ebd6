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

// The kernel above on the GPU: every value's half and bfloat16 bits equal CUDA's own conversions
// (round to nearest even), and the values read back in device code are those the bits say.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <cuda_runtime_api.h>

TEST_CASE("half and bfloat16 in device code: the bits of __float2half_rn and __float2bfloat16_rn") {
  std::vector<float> x;
  for (int e = -30; e <= 20; ++e) // normals, subnormals of half, overflow to inf, both signs
    for (float m : {1.0f, 1.0009765625f, 1.00048828125f, 1.3333334f, 1.9999999f})
      for (float s : {1.0f, -1.0f}) x.push_back(s * std::ldexp(m, e));
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(std::numeric_limits<float>::infinity());
  const int n = int(x.size());
  float *dx = nullptr, *dy = nullptr;
  cohort::half* dh = nullptr;
  cohort::bfloat16* db = nullptr;
  REQUIRE(cudaMalloc(&dx, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&dy, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&dh, n * sizeof(cohort::half)) == cudaSuccess);
  REQUIRE(cudaMalloc(&db, n * sizeof(cohort::bfloat16)) == cudaSuccess);
  REQUIRE(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  round_trip<<<(n + 127) / 128, 128>>>(dx, dh, db, dy, n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<cohort::half> h(n);
  std::vector<cohort::bfloat16> b(n);
  std::vector<float> y(n);
  REQUIRE(cudaMemcpy(h.data(), dh, n * sizeof(cohort::half), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(b.data(), db, n * sizeof(cohort::bfloat16), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < n; ++i) {
    INFO("x = " << x[i]);
    const __half ch = __float2half_rn(x[i]);
    const __nv_bfloat16 cb = __float2bfloat16_rn(x[i]);
    std::uint16_t hb = 0, bb = 0;
    std::memcpy(&hb, &ch, 2);
    std::memcpy(&bb, &cb, 2);
    CHECK(h[i].bits == hb);
    CHECK(b[i].bits == bb);
    const float expect = __half2float(ch) + __bfloat162float(cb);
    CHECK(std::memcmp(&y[i], &expect, sizeof(float)) == 0);
  }
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dh);
  cudaFree(db);
}
