// train_on_device's clock on a GPU: CUDA events around each timing window, the CUDA profiler's
// switch (ncu --profile-from-start off), cohort's host-wait count and the device memory in use.
#pragma once

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <cohort/backend/cuda.cuh>
#include <cohort/backend/cuda/host_waits.cuh>
#include <cohort/backend/cuda/stream.cuh>

#include "train_on_device.hpp"

template <>
struct DeviceClock<cohort::Cuda> {
  static constexpr const char* what = "cuda events";
  explicit DeviceClock(int device) : device_(device) {
    COHORT_CUDA_CHECK(cudaEventCreate(&start_), device_);
    COHORT_CUDA_CHECK(cudaEventCreate(&stop_), device_);
  }
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;
  ~DeviceClock() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  // The engine's streams are its own, so both events are recorded on an idle device (after a
  // device-wide synchronisation): the window is the GPU's time from its first kernel's queueing
  // to its last kernel's end, host gaps included, as torch.cuda.Event is used in the PyTorch twin.
  void start() {
    COHORT_CUDA_CHECK(cudaDeviceSynchronize(), device_);
    COHORT_CUDA_CHECK(cudaEventRecord(start_, nullptr), device_);
  }
  double stop_ms() {
    COHORT_CUDA_CHECK(cudaDeviceSynchronize(), device_);
    COHORT_CUDA_CHECK(cudaEventRecord(stop_, nullptr), device_);
    COHORT_CUDA_CHECK(cudaEventSynchronize(stop_), device_);
    float ms = 0;
    COHORT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), device_);
    return double(ms);
  }
  static void profile(bool on) { COHORT_CUDA_CHECK(on ? cudaProfilerStart() : cudaProfilerStop(), -1); }
  static std::uint64_t host_waits() { return cohort::gpu::host_waits(); }
  /// The device's memory in use (every process's, the CUDA context included), as
  /// torch.cuda.mem_get_info reports it in the PyTorch twin.
  static double device_used_mib(int device) {
    cohort::gpu::detail::DeviceGuard on(device);
    std::size_t free = 0, total = 0;
    COHORT_CUDA_CHECK(cudaMemGetInfo(&free, &total), device);
    return double(total - free) / (1024.0 * 1024.0);
  }

 private:
  int device_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};
using TrainOnDeviceBackend = cohort::Cuda;
