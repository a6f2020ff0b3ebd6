#pragma once
/// \file
/// Owners of CUDA streams and events, each tied to the device it was created on: what the
/// communication stream of the gradient all-reduce and the batch prefetch are built from.
///
///     gpu::Stream comm(device);              // non-blocking: no implicit sync with stream 0
///     gpu::Event bucket_ready(device);
///     bucket_ready.record(compute_stream);
///     comm.wait(bucket_ready);               // comm runs after the bucket's gradients exist

#include <utility>

#include <cuda_runtime_api.h>

#include "cohort/backend/cuda/error.cuh"
#include "cohort/backend/cuda/host_waits.cuh"

namespace cohort::gpu {

namespace detail {
/// Makes `device` current for the lifetime of the guard, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    COHORT_CUDA_CHECK(cudaGetDevice(&previous_), device);
    if (previous_ != device) COHORT_CUDA_CHECK(cudaSetDevice(device), device);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() { (void)cudaSetDevice(previous_); } // no throwing from a destructor

 private:
  int previous_ = 0;
};
} // namespace detail

/// A CUDA event without timing (the cheap kind, for ordering streams).
class Event {
 public:
  explicit Event(int device) : device_(device) {
    detail::DeviceGuard on(device);
    COHORT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), device);
  }
  Event(Event&& o) noexcept : device_(o.device_), event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);
  }
  /// Marks the point `stream` has reached (the work queued on it so far).
  void record(cudaStream_t stream) { COHORT_CUDA_CHECK(cudaEventRecord(event_, stream), device_); }
  void synchronize() const {
    detail::count_host_wait();
    COHORT_CUDA_CHECK(cudaEventSynchronize(event_), device_);
  }
  cudaEvent_t get() const noexcept { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

/// A non-blocking CUDA stream on one device.
class Stream {
 public:
  explicit Stream(int device) : device_(device) {
    detail::DeviceGuard on(device);
    COHORT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), device);
  }
  Stream(Stream&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  ~Stream() {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }
  /// Work queued on this stream from now on runs after `e`'s point on its stream.
  void wait(const Event& e) { COHORT_CUDA_CHECK(cudaStreamWaitEvent(stream_, e.get(), 0), device_); }
  cudaStream_t get() const noexcept { return stream_; }
  int device() const noexcept { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

/// Work queued on `stream` (of `device`) from now on runs after `e`.
inline void stream_wait(cudaStream_t stream, const Event& e, int device) {
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(stream, e.get(), 0), device);
}

} // namespace cohort::gpu
