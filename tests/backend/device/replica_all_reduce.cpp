// device::ReplicaAllReduce (backend/device/replica_all_reduce.hpp) on ThrustDevice: buckets
// started by replica threads in any interleaving are summed in replica order, every replica
// gets the total, a replica that starts nothing is covered by finish(), and out-of-order starts
// are refused.
#include <doctest/doctest.h>

#include <cstddef>
#include <random>
#include <thread>
#include <vector>

#include <cohort/backend/thrust_device.hpp>
#include <cohort/parallel/gradient_buckets.hpp>

using namespace cohort;

namespace {
constexpr std::size_t replicas = 3, values = 1000;

std::vector<GradientBucket> three_buckets() { // backward order: the store's end first
  return {{.begin = 600, .end = 1000, .first_layer = 4},
          {.begin = 100, .end = 600, .first_layer = 2},
          {.begin = 0, .end = 100, .first_layer = 0}};
}

struct Stores {
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer<float>> device;
  std::vector<float*> pointers;
  explicit Stores(std::uint32_t seed) : host(replicas), device(replicas), pointers(replicas) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (std::size_t r = 0; r < replicas; ++r) {
      host[r].resize(values);
      for (float& v : host[r]) v = u(gen);
      device[r].assign_from_host(host[r].data(), values);
      pointers[r] = device[r].data();
    }
  }
  /// The sum in replica order, as float additions (what the reduction promises bitwise).
  std::vector<float> expected() const {
    std::vector<float> sum = host[0];
    for (std::size_t r = 1; r < replicas; ++r)
      for (std::size_t i = 0; i < values; ++i) sum[i] += host[r][i];
    return sum;
  }
  std::vector<float> on_host(std::size_t r) const {
    std::vector<float> out(values);
    device[r].copy_to_host(out.data(), values);
    return out;
  }
};
} // namespace

TEST_CASE("replica all-reduce: buckets started from racing threads sum in replica order, bitwise") {
  std::vector<ThrustDeviceContext> ctx(replicas);
  device::ReplicaAllReduce<ThrustDevice> reduce(ctx, three_buckets());
  for (std::uint32_t round = 0; round < 5; ++round) { // several steps on one object: begin() resets
    Stores s(round);
    reduce.begin(s.pointers);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < replicas; ++r)
      threads.emplace_back([&, r] {
        // Replica 1 starts nothing itself (a replica without samples): finish() covers it.
        if (r != 1)
          for (std::size_t b = 0; b < 3; ++b) {
            if ((r + round) % 2) std::this_thread::yield(); // vary who arrives last
            reduce.start(r, ctx[r], b);
          }
        reduce.finish(r, ctx[r]);
      });
    for (auto& t : threads) t.join();
    const auto want = s.expected();
    for (std::size_t r = 0; r < replicas; ++r) CHECK(s.on_host(r) == want);
  }
}

TEST_CASE("replica all-reduce: a bucket started out of order is a DistributedError naming the replica") {
  std::vector<ThrustDeviceContext> ctx(replicas);
  device::ReplicaAllReduce<ThrustDevice> reduce(ctx, three_buckets());
  Stores s(9);
  reduce.begin(s.pointers);
  CHECK_THROWS_WITH_AS(reduce.start(2, ctx[2], 1), "replica 2: gradient bucket 1 started before bucket 0",
                       DistributedError);
}
