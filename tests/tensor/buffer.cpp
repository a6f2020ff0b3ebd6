#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/core/shape.hpp>
#include <cohort/tensor/batch.hpp>
#include <cohort/tensor/buffer.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

using namespace cohort;

namespace {
/// Records what HostBuffer asks of its allocator (the Cuda backend plugs page-locked memory in here).
struct CountingAllocator {
  static inline std::map<void*, std::size_t> blocks; // live blocks and their sizes
  static inline std::size_t last_bytes = 0;
  static void* allocate(std::size_t bytes) {
    void* p = AlignedAllocator::allocate(bytes);
    blocks[p] = last_bytes = bytes;
    return p;
  }
  static void deallocate(void* p, std::size_t bytes) noexcept {
    CHECK(blocks.at(p) == bytes); // released with the size it was allocated with
    blocks.erase(p);
    AlignedAllocator::deallocate(p, bytes);
  }
};
} // namespace

TEST_CASE("HostBuffer: memory comes from its allocator and goes back to it") {
  {
    HostBuffer<float, CountingAllocator> b(10);
    CHECK(CountingAllocator::blocks.size() == 1);
    CHECK(CountingAllocator::last_bytes == buffer_alignment); // 40 bytes, rounded up to a whole line
    b[2] = 5.f;
    b.resize(100); // grows: a new block, the old one released
    CHECK(CountingAllocator::blocks.size() == 1);
    CHECK(CountingAllocator::last_bytes == 448);
    CHECK(b[2] == 5.f);
    b.resize(3); // shrinking keeps the block
    CHECK(CountingAllocator::blocks.size() == 1);
  }
  CHECK(CountingAllocator::blocks.empty());
}

TEST_CASE("HostBuffer: aligned, zeroed, keeps capacity when shrinking") {
  HostBuffer<float> b(10);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % buffer_alignment == 0);
  for (float v : b) CHECK(v == 0.f);
  b[3] = 7.f;
  float* before = b.data();
  b.resize(4);
  b.resize(10);
  CHECK(b.data() == before); // no reallocation below the capacity
  CHECK(b[3] == 7.f);
  b.resize(1000);
  CHECK(b[3] == 7.f); // contents survive growth
  CHECK(b[999] == 0.f);
  HostBuffer<float> c = b;
  CHECK(c.size() == 1000);
  CHECK(c[3] == 7.f);
  HostBuffer<float> d = std::move(c);
  CHECK(d[3] == 7.f);
  CHECK(c.size() == 0);
}

TEST_CASE("as_batch: views an xtensor container and reports shape mismatches") {
  xt::xtensor<float, 4> x = xt::zeros<float>({5, 1, 28, 28});
  auto v = as_batch<Shape<1, 28, 28>>(x);
  CHECK(v.batch() == 5);
  CHECK(v.data() == x.data());
  v.tensor()(2, 0, 3, 4) = 9.f;
  CHECK(x(2, 0, 3, 4) == 9.f);
  CHECK(v.slice(2, 3).data() == v.sample(2));

  xt::xtensor<float, 4> wrong = xt::zeros<float>({5, 3, 28, 28});
  using Image = Shape<1, 28, 28>;
  CHECK_THROWS_WITH_AS(as_batch<Image>(wrong, "Network input"),
                       "Network input: expected a batch of shape N x 1x28x28, found 5x3x28x28", ShapeError);
  xt::xtensor<float, 2> flat = xt::zeros<float>({5, 784});
  CHECK_THROWS_AS(as_batch<Image>(flat), ShapeError);
}
