#pragma once
/// \file
/// Every CUDA runtime and cuBLAS call of the CUDA backend is checked; a failure becomes a
/// `cohort::CudaError` naming the call, the device and the rank:
///
///     cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory) on device 1, rank 3
///
///     COHORT_CUDA_CHECK(cudaSetDevice(d), d);

#include <cstdlib>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cohort/core/error.hpp"

namespace cohort {

/// A CUDA runtime, cuBLAS or NCCL call, or a Thrust algorithm on the GPU, failed.
class CudaError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

namespace gpu::detail {
/// This process's rank as the launcher set it (mpirun, srun), or "-" outside a launcher: enough to
/// find the failing process in the logs of a multi-node job.
inline std::string launch_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"})
    if (const char* v = std::getenv(name)) return v;
  return "-";
}
inline std::string where(int device) { return cohort::detail::concat(" on device ", device, ", rank ", launch_rank()); }

inline void check(cudaError_t e, const char* call, int device) {
  if (e != cudaSuccess)
    throw CudaError(cohort::detail::concat(call, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")",
                                           where(device)));
}
inline void check(cublasStatus_t s, const char* call, int device) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(cohort::detail::concat(call, " failed: ", cublasGetStatusName(s), " (", cublasGetStatusString(s),
                                           ")", where(device)));
}
} // namespace gpu::detail

} // namespace cohort

/// Checks a CUDA runtime or cuBLAS call made for `device`; throws CudaError naming it.
#define COHORT_CUDA_CHECK(call, device) ::cohort::gpu::detail::check((call), #call, (device))
