#pragma once
/// \file
/// Device memory that grows but never shrinks: the device backends' counterpart of HostBuffer,
/// a thin owner over `thrust::device_vector`.
///
///     cohort::DeviceBuffer<float> b;
///     b.resize(1024);                        // allocates on the device, zeroed
///     b.resize_uninitialized(512);           // a workspace kernels overwrite: no zeroing
///     b.assign_from_host(host.data(), 1024); // host -> device
///     b.copy_to_host(host.data(), 1024);     // device -> host
///     kernel(b.data());                      // a raw device pointer for kernels and cuBLAS
///
/// The device is whatever THRUST_DEVICE_SYSTEM names: CUDA under nvcc, OpenMP or plain C++
/// when the same code is compiled with g++ (the CPU runs of the device test suite). `data()` is
/// a device pointer: dereferencing it on the host is only valid on the CPU device systems, so
/// host code always goes through the copy functions.
///
/// The storage's allocator never throws from deallocate (device/non_throwing_allocator.hpp says
/// why) and counts allocations: device::storage_allocations(); device::zero_fills() counts the
/// zeroing passes of resize (tests: a steady training step makes neither).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>

#include "cohort/backend/device/non_throwing_allocator.hpp"

namespace cohort {

namespace device {
namespace detail {
inline std::atomic<std::uint64_t> zero_fill_count{0};
} // namespace detail
/// Zeroing passes of DeviceBuffer::resize so far in this process (a device kernel each).
inline std::uint64_t zero_fills() noexcept { return detail::zero_fill_count.load(); }
} // namespace device

/// A growable device array of trivially copyable `T`; new elements are zeroed (by resize).
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "DeviceBuffer holds trivially copyable elements only");

 public:
  using allocator_type = device::NonThrowingAllocator<T>;
  using storage_type = thrust::device_vector<T, allocator_type>;

  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }

  /// Sets the size; reallocates (keeping the contents) only when `n` exceeds the capacity.
  /// Elements between the old and the new size are zeroed, as HostBuffer does.
  void resize(std::size_t n) {
    reserve(n); // keeps the contents
    // Zero [size_, n) here rather than rely on resize: after a shrink, the storage past size_
    // still holds the old values.
    if (n > size_) {
      thrust::fill(storage_.begin() + std::ptrdiff_t(size_), storage_.begin() + std::ptrdiff_t(n), T{});
      device::detail::zero_fill_count.fetch_add(1, std::memory_order_relaxed);
    }
    size_ = n;
  }
  /// Sets the size without zeroing: for workspaces that kernels overwrite whole before reading
  /// (a per-step zero fill is a device pass per call). Elements past the old size hold whatever
  /// was there; only growth beyond the capacity allocates (and then zeroes the new storage).
  void resize_uninitialized(std::size_t n) {
    reserve(n);
    size_ = n;
  }
  /// Grows the storage to hold `n` elements (keeping the contents), leaving the size as it is.
  void reserve(std::size_t n) {
    if (n > storage_.size()) storage_.resize(n);
  }
  void fill(T value) { thrust::fill(storage_.begin(), storage_.begin() + std::ptrdiff_t(size_), value); }

  /// Replaces the contents with `n` host values (resizing to `n`).
  void assign_from_host(const T* host, std::size_t n) {
    resize_uninitialized(n); // every element is then overwritten
    thrust::copy(host, host + n, storage_.begin());
  }
  void assign_from_host(std::span<const T> host) { assign_from_host(host.data(), host.size()); }
  /// Copies the first `n` elements to host memory.
  void copy_to_host(T* host, std::size_t n) const {
    thrust::copy(storage_.begin(), storage_.begin() + std::ptrdiff_t(n), host);
  }
  /// The contents as a host vector (for tests and checkpoints).
  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    copy_to_host(out.data(), size_);
    return out;
  }

  T* data() noexcept { return thrust::raw_pointer_cast(storage_.data()); }
  const T* data() const noexcept { return thrust::raw_pointer_cast(storage_.data()); }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return storage_.size(); }
  bool empty() const noexcept { return size_ == 0; }

 private:
  storage_type storage_;
  std::size_t size_ = 0;
};

/// `n` elements at a device pointer (a network's output or input gradient) as a host vector.
template <class T>
std::vector<T> copy_to_host(const T* device_data, std::size_t n) {
  std::vector<T> out(n);
  const auto first = thrust::device_pointer_cast(device_data);
  thrust::copy(first, first + std::ptrdiff_t(n), out.begin());
  return out;
}

} // namespace cohort
