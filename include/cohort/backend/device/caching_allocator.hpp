#pragma once
/// \file
/// Temporary storage for Thrust algorithms, kept for reuse. reduce, transform_reduce and
/// reduce_by_key (CUB underneath) ask for scratch memory on every call; through Thrust's default
/// allocator that is a cudaMalloc and a cudaFree per call, and each cudaFree synchronises the
/// device. A context hands its allocator to Thrust (`thrust::device(alloc)`,
/// `thrust::cuda::par_nosync(alloc).on(stream)`), and after the first training step every
/// request is served from the blocks the previous step gave back.
///
///     auto alloc = std::make_shared<cohort::device::CachingAllocator>();
///     thrust::reduce(thrust::device(*alloc), first, last);  // allocates once
///     thrust::reduce(thrust::device(*alloc), first, last);  // reuses the block
///     alloc->upstream_allocations();                        // 1
///
/// Reuse without synchronising is safe because one allocator serves one context, whose Thrust
/// calls are ordered on one stream: a block given back when an algorithm returns on the host
/// (its kernels possibly still running) is next used by an algorithm queued behind them on the
/// same stream. Never share one allocator between contexts on different streams or devices.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>

namespace cohort::device {

/// A Thrust temporary-storage allocator (value_type char) that caches freed blocks by size and
/// hands out the smallest cached block that fits. The cache is released at destruction, without
/// throwing (as NonThrowingAllocator, for the same reason). Thread-safe.
class CachingAllocator {
 public:
  using value_type = char;

  /// Requests are rounded up to this (CUB's temporaries are 256-byte aligned sizes already), so
  /// sizes that differ by a few bytes share blocks.
  static constexpr std::size_t granularity = 256;
  /// A cached block serves a request only if it is at most this many times larger, so a small
  /// request does not pin a large block that a later large request then cannot find.
  static constexpr std::size_t max_waste_factor = 2;

  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete; // contexts share one through a pointer
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() { release(); }

  char* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / 4) throw std::bad_alloc(); // no device has that
    const std::size_t bytes = rounded(n);
    requests_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      if (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= bytes * max_waste_factor) {
        char* p = it->second;
        live_.emplace(p, it->first);
        cached_bytes_ -= it->first;
        free_.erase(it);
        return p;
      }
    }
    char* p = nullptr;
    try {
      p = upstream_allocate(bytes);
    } catch (const std::bad_alloc&) {
      release(); // the cached blocks may be what the device is missing: give them back, try once more
      p = upstream_allocate(bytes);
    }
    try {
      std::lock_guard lock(mutex_);
      live_.emplace(p, bytes);
    } catch (...) {
      free_upstream(p);
      throw;
    }
    return p;
  }

  void deallocate(char* p, std::size_t) noexcept {
    std::lock_guard lock(mutex_);
    const auto it = live_.find(p);
    if (it == live_.end()) return; // not ours: nothing sensible to do in a noexcept path
    try {
      free_.emplace(it->second, p);
      cached_bytes_ += it->second;
    } catch (...) { // no memory for the map node: give the block back instead of caching it
      free_upstream(p);
    }
    live_.erase(it);
  }

  /// Frees every cached block (blocks in use stay in use).
  void release() noexcept {
    std::lock_guard lock(mutex_);
    for (const auto& [bytes, p] : free_) free_upstream(p);
    free_.clear();
    cached_bytes_ = 0;
  }

  /// Blocks obtained from the device so far (a steady training step adds none).
  std::uint64_t upstream_allocations() const noexcept { return upstream_allocations_.load(); }
  /// Requests so far: one per Thrust algorithm that needed temporary storage. On CUDA those are
  /// the reductions, and a reduction whose result comes back to the host waits for the device.
  std::uint64_t requests() const noexcept { return requests_.load(); }
  /// Bytes held in the cache, not in use.
  std::size_t cached_bytes() const noexcept {
    std::lock_guard lock(mutex_);
    return cached_bytes_;
  }

 private:
  static std::size_t rounded(std::size_t n) noexcept {
    return (n == 0 ? 1 : (n + granularity - 1) / granularity) * granularity;
  }
  char* upstream_allocate(std::size_t bytes) {
    char* p = thrust::raw_pointer_cast(thrust::device_malloc<char>(bytes));
    if (!p) throw std::bad_alloc(); // CUDA's malloc throws itself; the CPU systems' return null
    upstream_allocations_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  static void free_upstream(char* p) noexcept {
    try {
      thrust::device_free(thrust::device_pointer_cast(static_cast<void*>(p)));
    } catch (...) { // a faulted device: the memory goes with its context
    }
  }

  mutable std::mutex mutex_;
  std::multimap<std::size_t, char*> free_;      // cached blocks by size
  std::unordered_map<char*, std::size_t> live_; // blocks in use -> their (rounded) size
  std::size_t cached_bytes_ = 0;
  std::atomic<std::uint64_t> upstream_allocations_{0};
  std::atomic<std::uint64_t> requests_{0};
};

} // namespace cohort::device
