#pragma once
/// \file
/// The allocator of DeviceBuffer's storage: its `deallocate` never throws. Thrust's own
/// `device_allocator` reports a failed cudaFree (after a sticky device fault, every later call
/// fails) by throwing from a noexcept `deallocate`, so the first `~device_vector` that runs while
/// a CudaError unwinds calls std::terminate and the error's message is lost. Here the failure is
/// counted and swallowed: the memory is gone with the device context anyway, and the error that
/// matters is the one already on its way.
///
///     thrust::device_vector<float, cohort::device::NonThrowingAllocator<float>> v(1024);
///     cohort::device::storage_allocations(); // every allocation so far (tests: steady states)
///
/// `Upstream` allocates and frees (tests pass one whose free throws); the default,
/// ThrustMallocAllocator, goes through thrust::device_malloc / thrust::device_free, which throw
/// catchable exceptions on failure (Thrust's device_allocator cannot be the upstream: its
/// deallocate is itself noexcept, so it would terminate before the wrapper could catch).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>

#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>
#include <thrust/device_reference.h>

namespace cohort::device {

namespace detail {
/// Storage allocations and swallowed deallocation failures, over the whole process.
inline std::atomic<std::uint64_t> storage_allocation_count{0};
inline std::atomic<std::uint64_t> failed_free_count{0};
} // namespace detail

/// DeviceBuffer storage allocations so far in this process (a steady training step makes none).
inline std::uint64_t storage_allocations() noexcept { return detail::storage_allocation_count.load(); }
/// Deallocations whose failure NonThrowingAllocator swallowed so far in this process.
inline std::uint64_t failed_deallocations() noexcept { return detail::failed_free_count.load(); }

/// Device memory from Thrust's generic malloc/free for the device system (cudaMalloc/cudaFree on
/// CUDA, the heap on OpenMP); both throw on failure (std::bad_alloc, thrust::system_error).
template <class T>
struct ThrustMallocAllocator {
  using value_type = T;
  using pointer = thrust::device_ptr<T>;
  using const_pointer = thrust::device_ptr<const T>;
  using reference = thrust::device_reference<T>;
  using const_reference = thrust::device_reference<const T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using is_always_equal = std::true_type;
  template <class U>
  struct rebind {
    using other = ThrustMallocAllocator<U>;
  };

  ThrustMallocAllocator() = default;
  template <class U>
  ThrustMallocAllocator(const ThrustMallocAllocator<U>&) noexcept {}

  pointer allocate(size_type n) {
    if (n > std::numeric_limits<size_type>::max() / sizeof(T)) throw std::bad_array_new_length();
    pointer p = thrust::device_malloc<T>(n);
    // CUDA's malloc throws on failure; the CPU systems' return null (std::malloc).
    if (!p.get() && n > 0) throw std::bad_alloc();
    return p;
  }
  void deallocate(pointer p, size_type) { thrust::device_free(p); }

  friend bool operator==(const ThrustMallocAllocator&, const ThrustMallocAllocator&) noexcept { return true; }
};

/// `Upstream` with a noexcept `deallocate`: failures are counted (failed_deallocations()), not
/// thrown. Allocations are counted too (storage_allocations()). Stateless: all instances equal.
template <class T, class Upstream = ThrustMallocAllocator<T>>
class NonThrowingAllocator {
  static_assert(std::is_empty_v<Upstream>, "NonThrowingAllocator: the upstream allocator must be stateless");

 public:
  using upstream_type = Upstream;
  using value_type = T;
  using pointer = typename Upstream::pointer;
  using const_pointer = typename Upstream::const_pointer;
  using reference = typename Upstream::reference;
  using const_reference = typename Upstream::const_reference;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  // As Thrust's allocators: containers take the allocator along on copy, move and swap.
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::true_type;
  template <class U>
  struct rebind {
    using other = NonThrowingAllocator<U, typename Upstream::template rebind<U>::other>;
  };

  NonThrowingAllocator() = default;
  template <class U, class V>
  NonThrowingAllocator(const NonThrowingAllocator<U, V>&) noexcept {}

  pointer allocate(size_type n) {
    pointer p = Upstream{}.allocate(n);
    detail::storage_allocation_count.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  void deallocate(pointer p, size_type n) noexcept {
    try {
      Upstream{}.deallocate(p, n);
    } catch (...) {
      detail::failed_free_count.fetch_add(1, std::memory_order_relaxed);
    }
  }

  friend bool operator==(const NonThrowingAllocator&, const NonThrowingAllocator&) noexcept { return true; }
};

} // namespace cohort::device
