#pragma once
/// \file
/// `Cuda`: the device kernels of backend/device/ on an NVIDIA GPU, with cuBLAS for every GEMM
/// and a CUDA stream per context. CUDA code: compile with nvcc and link the cohort::cuda CMake
/// target (it defines COHORT_WITH_CUDA and adds cudart and cuBLAS).
///
///     #include <cohort/backend/cuda.cuh>
///     cohort::Network<ModelA, float, cohort::Cuda> net(seed);   // on the current device
///
/// The same kernels run on the CPU in CI (cohort/backend/thrust_device.hpp, Thrust's OpenMP
/// system); this file adds only what needs the CUDA runtime.

#if !defined(__CUDACC__)
#error "cohort/backend/cuda.cuh is CUDA code: compile it with nvcc (CMake: a .cu source linked to cohort::cuda)"
#endif

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>
#include <thrust/system/cuda/execution_policy.h>

#include "cohort/backend/cuda/cublas_gemm.cuh"
#include "cohort/backend/cuda/error.cuh"
#include "cohort/backend/cuda/host_waits.cuh"
#include "cohort/backend/cuda/pinned_allocator.cuh"
#include "cohort/backend/device/activation.hpp"
#include "cohort/backend/device/batch_norm.hpp"
#include "cohort/backend/device/caching_allocator.hpp"
#include "cohort/backend/device/conv2d.hpp"
#include "cohort/backend/device/conv_transpose2d.hpp"
#include "cohort/backend/device/depthwise_conv2d.hpp"
#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/elementwise.hpp"
#include "cohort/backend/device/errors.hpp"
#include "cohort/backend/device/group_norm.hpp"
#include "cohort/backend/device/linear.hpp"
#include "cohort/backend/device/pool.hpp"
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/backend/device/softmax.hpp"
#include "cohort/backend/device/upsample.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

/// Where the CUDA kernels of one replica run: its device and stream (the default stream unless
/// an engine gives the replica its own). Kernels launch on the calling thread's current device,
/// which must be `device` (engines call cudaSetDevice once per replica thread).
struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  bool allow_tf32 = false; // float GEMMs on TF32 tensor cores (DataParallelOptions::allow_tf32)

  /// Thrust's temporary storage (CUB's scratch for reduce, transform_reduce), cached for reuse:
  /// no cudaMalloc/cudaFree (a device sync) per algorithm after the first step. Copies of this
  /// context share it; they run on its stream and device. A context given another stream or
  /// device must get its own (temporaries = std::make_shared<device::CachingAllocator>()).
  std::shared_ptr<device::CachingAllocator> temporaries = std::make_shared<device::CachingAllocator>();

  auto policy() const { return thrust::cuda::par_nosync(*temporaries).on(stream); }
  /// Makes `device` the calling thread's current device (engines call it once per thread).
  void activate() const { COHORT_CUDA_CHECK(cudaSetDevice(device), device); }
  template <class In, class Out>
  void gemm(const device::GemmArgs<In, Out>& g) const {
    gpu::gemm(g, device, stream, allow_tf32);
  }
  /// Queues the copy of n elements from host to device on the stream; returns at once. From
  /// page-locked memory the copy is truly asynchronous: the caller leaves `host` unchanged until
  /// the stream has passed this point (from pageable memory CUDA copies it before returning).
  template <class T>
  void copy_to_device(const T* host, T* device_ptr, std::size_t n) const {
    COHORT_CUDA_CHECK(cudaMemcpyAsync(device_ptr, host, n * sizeof(T), cudaMemcpyHostToDevice, stream), device);
  }
  /// Copies n elements from device to host on the stream and waits for them: the copy runs after
  /// the kernels queued before it (a copy on the default stream would not wait for a
  /// non-blocking stream's kernels).
  template <class T>
  void copy_to_host(const T* device_ptr, T* host, std::size_t n) const {
    COHORT_CUDA_CHECK(cudaMemcpyAsync(host, device_ptr, n * sizeof(T), cudaMemcpyDeviceToHost, stream), device);
    synchronize();
  }
  /// f(), with Thrust's errors (and failed allocations) rethrown as CudaError naming `what`, the
  /// device and the rank.
  template <class F>
  decltype(auto) translate_errors(const char* what, F&& f) const {
    return device::translate_thrust_errors<CudaError>(
        what, [this] { return gpu::detail::where(device); }, std::forward<F>(f));
  }
  /// GPUs this process sees (ProcessGroupDDP picks its rank's among them).
  static int visible_devices() {
    int n = 0;
    COHORT_CUDA_CHECK(cudaGetDeviceCount(&n), -1);
    return n;
  }
  /// The device's PCI bus id: the same GPU under any CUDA_VISIBLE_DEVICES numbering (two ranks
  /// of a node must not share one).
  std::string identity() const {
    char bus[32] = {};
    COHORT_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, int(sizeof bus), device), device);
    return bus;
  }
  /// Waits for everything queued on the stream; errors of earlier kernels surface here.
  void synchronize() const {
    gpu::detail::count_host_wait(); // (profiling: backend/cuda/host_waits.cuh)
    COHORT_CUDA_CHECK(cudaStreamSynchronize(stream), device);
  }
};

/// The backend tag (declared in backend/ops.hpp so policies can name it without CUDA).
struct Cuda {
  using context = CudaContext;
  template <class U>
  using buffer = DeviceBuffer<U>;
  static constexpr const char* name = "cuda";
  static constexpr bool host_memory = false;
  /// Batches are staged in page-locked memory (the Trainer's prefetch).
  using staging_allocator = gpu::PinnedAllocator;
};

template <>
struct ops::Conv2dKernels<Cuda> : device::Conv2dKernels<Cuda> {};
template <>
struct ops::ConvTranspose2dKernels<Cuda> : device::ConvTranspose2dKernels<Cuda> {};
template <>
struct ops::DepthwiseConv2dKernels<Cuda> : device::DepthwiseConv2dKernels<Cuda> {};
template <>
struct ops::LinearKernels<Cuda> : device::LinearKernels<Cuda> {};
template <>
struct ops::PoolKernels<Cuda> : device::PoolKernels<Cuda> {};
template <>
struct ops::UpsampleKernels<Cuda> : device::UpsampleKernels<Cuda> {};
template <>
struct ops::GroupNormKernels<Cuda> : device::GroupNormKernels<Cuda> {};
template <>
struct ops::BatchNormKernels<Cuda> : device::BatchNormKernels<Cuda> {};
template <>
struct ops::ElementwiseKernels<Cuda> : device::ElementwiseKernels<Cuda> {};
template <>
struct ops::SoftmaxKernels<Cuda> : device::SoftmaxKernels<Cuda> {};
template <>
struct ops::ActivationKernels<Cuda> : device::ActivationKernels<Cuda> {};

/// GPUs visible to this process (0 without a driver or device: no exception, so programs and
/// tests can skip).
inline int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); // clear the sticky "no device" error
    return 0;
  }
  return n;
}

} // namespace cohort
