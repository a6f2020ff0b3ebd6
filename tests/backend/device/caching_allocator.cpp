// CachingAllocator (backend/device/caching_allocator.hpp) on the ThrustDevice backend: blocks
// come back for reuse, and a ThrustDeviceContext's Thrust algorithms take their temporary storage
// from the context's cache.
#include <new>
#include <vector>

#include <doctest/doctest.h>

#include <thrust/reduce.h>

#include <cohort/backend/thrust_device.hpp>

using namespace cohort;

TEST_CASE("CachingAllocator: freed blocks are reused by size, the smallest that fits and is not too large") {
  device::CachingAllocator a;
  char* p = a.allocate(1000);
  char* q = a.allocate(5000);
  CHECK(a.upstream_allocations() == 2);
  a.deallocate(p, 1000);
  a.deallocate(q, 5000);
  CHECK(a.cached_bytes() == 1024 + 5120);
  CHECK(a.allocate(900) == p); // same size class (1024)
  CHECK(a.cached_bytes() == 5120);
  char* r = a.allocate(100); // the 5120 block would waste more than half: a new one
  CHECK(r != q);
  CHECK(a.upstream_allocations() == 3);
  CHECK(a.allocate(4000) == q); // fits, not wasteful
  CHECK(a.upstream_allocations() == 3);
  CHECK(a.cached_bytes() == 0);
  for (char* b : {p, q, r}) a.deallocate(b, 0);
  CHECK(a.cached_bytes() == 1024 + 5120 + 256);
  a.release();
  CHECK(a.cached_bytes() == 0);
  a.allocate(1000);
  CHECK(a.upstream_allocations() == 4);
  a.deallocate(a.allocate(3000), 3000);
  CHECK(a.cached_bytes() == 3072);
  // A failed allocation gives the cache back to the device before failing (it may be what is missing).
  CHECK_THROWS_AS(a.allocate(std::size_t(1) << 50), std::bad_alloc);
  CHECK(a.cached_bytes() == 0);
} // destroyed with a block in use: that block is not the cache's to free

TEST_CASE("CachingAllocator: a context's reductions take their temporaries from its cache, copies share it") {
  ThrustDeviceContext ctx;
  const ThrustDeviceContext copy = ctx;
  CHECK(copy.temporaries == ctx.temporaries);
  CHECK(ThrustDeviceContext{}.temporaries != ctx.temporaries);

  std::vector<double> host(100000, 0.5);
  DeviceBuffer<double> v;
  v.assign_from_host(host.data(), host.size());
  const auto first = thrust::device_pointer_cast(v.data());
  CHECK(thrust::reduce(copy.policy(), first, first + std::ptrdiff_t(v.size())) == 50000.0);
  const auto warm = ctx.temporaries->upstream_allocations();
  CHECK(warm > 0); // the reduction asked for temporary storage (per-thread partial sums on OpenMP)
  CHECK(ctx.temporaries->cached_bytes() > 0);
  for (int i = 0; i < 5; ++i) CHECK(thrust::reduce(ctx.policy(), first, first + std::ptrdiff_t(v.size())) == 50000.0);
  CHECK(ctx.temporaries->upstream_allocations() == warm);
}
