#pragma once
/// \file
/// The CUDA backend's GEMM seam (backend/device/gemm.hpp) on cuBLAS: one
/// cublasGemmStridedBatchedEx per call, fp32 (fp64 for double) accumulation, 16-bit inputs as
/// CUDA_R_16F / CUDA_R_16BF (tensor cores where the GPU has them).

#include <map>
#include <type_traits>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cohort/backend/cuda/error.cuh"
#include "cohort/backend/device/gemm.hpp"
#include "cohort/precision/half.hpp"

// The CUDA runtime helpers live in cohort::gpu, not cohort::cuda: after `using namespace cohort`
// a cohort::cuda would make the `cuda::` names in nvcc's generated stubs (libcu++) ambiguous.
namespace cohort::gpu {

/// The cuBLAS type of an element type.
template <class T>
constexpr cudaDataType_t data_type() {
  if constexpr (std::is_same_v<T, float>)
    return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>)
    return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, half>)
    return CUDA_R_16F;
  else {
    static_assert(std::is_same_v<T, bfloat16>, "cuBLAS GEMM: element types are float, double, half and bfloat16");
    return CUDA_R_16BF;
  }
}

/// A cuBLAS handle per (thread, device), created on first use and destroyed with the thread.
/// Handles are not thread-safe; one per replica thread avoids any locking.
inline cublasHandle_t cublas_handle(int device) {
  struct Handles {
    std::map<int, cublasHandle_t> by_device;
    ~Handles() {
      for (auto& [d, h] : by_device) cublasDestroy(h); // no throwing from a destructor
    }
  };
  thread_local Handles handles;
  auto it = handles.by_device.find(device);
  if (it != handles.by_device.end()) return it->second;
  cublasHandle_t h = nullptr;
  COHORT_CUDA_CHECK(cublasCreate(&h), device);
  handles.by_device.emplace(device, h);
  return h;
}

/// Row-major C = alpha op(A) op(B) + beta C on `stream` of `device`. cuBLAS is column-major:
/// a row-major matrix is its transpose there, so C^T = op(B)^T op(A)^T is computed with the
/// operands swapped and the transpose flags kept. `tf32`: float inputs may be rounded to TF32
/// on tensor cores.
template <class In, class Out>
void gemm(const device::GemmArgs<In, Out>& g, int device, cudaStream_t stream, bool tf32 = false) {
  if (g.m == 0 || g.n == 0 || g.count == 0) return;
  using Scale = std::conditional_t<std::is_same_v<In, double>, double, float>;
  const Scale alpha = Scale(g.alpha), beta = Scale(g.beta);
  const cublasComputeType_t compute = std::is_same_v<In, double>            ? CUBLAS_COMPUTE_64F
                                      : (tf32 && std::is_same_v<In, float>) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                            : CUBLAS_COMPUTE_32F;
  cublasHandle_t h = cublas_handle(device);
  COHORT_CUDA_CHECK(cublasSetStream(h, stream), device);
  COHORT_CUDA_CHECK(cublasGemmStridedBatchedEx(
                        h, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.n),
                        int(g.m), int(g.k), &alpha, g.b, data_type<In>(), int(g.ldb), (long long)g.stride_b, g.a,
                        data_type<In>(), int(g.lda), (long long)g.stride_a, &beta, g.c, data_type<Out>(), int(g.ldc),
                        (long long)g.stride_c, int(g.count), compute, CUBLAS_GEMM_DEFAULT),
                    device);
}

} // namespace cohort::gpu
