// A steady training step allocates no device memory (issue 18, defect 7) on the ThrustDevice
// backend: after the first steps at a batch size, the Thrust algorithms' temporaries come from the
// context's cache (backend/device/caching_allocator.hpp) and no DeviceBuffer grows (the conv
// workspace alternates between two sizes within a step without reallocating or zero-filling).
// Every allocation would be a cudaMalloc/cudaFree pair on a GPU, each cudaFree a device sync.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/backend/thrust_device.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/device_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Dev = ThrustDevice;

/// Temporary-storage blocks obtained from the device by the engine's context, DeviceBuffer storage
/// allocations and zeroing resizes in the process: none in epochs 3 to 5, each a step per size in
/// `batches` as in the first two (after a short last batch the workspaces come back up to the full
/// size). `loss_fills`: zeroing resizes the loss makes per epoch (its buffers are the generic
/// Backend::buffer, grown with resize after a short batch: 2 x batch x classes values).
template <class Net, class Opt>
void check_steady_state(Opt opt, std::vector<std::size_t> batches, std::uint64_t loss_fills = 0) {
  using In = typename Net::input_shape;
  const std::size_t largest = *std::max_element(batches.begin(), batches.end());
  Trainer<Net, Opt, SingleDevice<Dev>> t(opt, {.batch_size = largest, .seed = 3, .log = nullptr});
  auto& engine = t.engine();
  const auto x = random_values(largest * In::size, 11);
  std::vector<std::int32_t> labels(largest);
  for (std::size_t i = 0; i < largest; ++i) labels[i] = std::int32_t(i * 7 % 10);
  std::uint64_t step = 0;
  const auto epoch = [&] {
    for (const std::size_t n : batches) {
      engine.step(ConstBatchView<In, float>(x.data(), n), std::span<const std::int32_t>(labels.data(), n),
                  {.step = step, .forward_pass = step});
      ++step;
    }
  };
  const auto& temporaries = *engine.context().temporaries;

  epoch(); // warm-up: buffers sized, optimiser state created, temporaries cached
  epoch();
  const auto upstream = temporaries.upstream_allocations();
  const auto storage = device::storage_allocations();
  const auto fills = device::zero_fills();
  // Without this the test could not fail: the step does use temporary storage (BatchNorm's
  // reduce_by_key, the loss's transform_reduce).
  REQUIRE(upstream > 0);
  CHECK(temporaries.cached_bytes() > 0);

  for (int e = 3; e <= 5; ++e) epoch();
  CHECK(temporaries.upstream_allocations() == upstream);
  CHECK(device::storage_allocations() == storage);
  CHECK(device::zero_fills() == fills + 3 * loss_fills); // nor zeroes a workspace it then overwrites
}
} // namespace

TEST_CASE("steady state: training steps 3 to 5 allocate no device memory (model B: conv, BatchNorm, pool, SGD)") {
  check_steady_state<models::ModelB>(Sgd({.lr = 0.05, .momentum = 0.9}), {16});
}

TEST_CASE("steady state: training steps 3 to 5 allocate no device memory (model A: dropout, Adam)") {
  check_steady_state<models::ModelA>(Adam({.lr = 1e-3}), {16});
}

TEST_CASE("steady state: epochs 3 to 5 with a short last batch allocate no device memory (model B)") {
  check_steady_state<models::ModelB>(Sgd({.lr = 0.05, .momentum = 0.9}), {16, 16, 7}, 2);
}

TEST_CASE("DeviceBuffer: resize_uninitialized sizes without zeroing, resize still zeroes") {
  DeviceBuffer<float> b;
  const std::vector<float> v{1, 2, 3, 4};
  b.assign_from_host(v.data(), v.size());
  const auto storage = device::storage_allocations();
  const auto fills = device::zero_fills();
  b.resize_uninitialized(2);
  b.resize_uninitialized(4); // no fill: the old 3 and 4 are still there
  CHECK(b.to_host() == v);
  CHECK(device::zero_fills() == fills);
  b.resize(2);
  b.resize(4); // a zeroing resize past the size zeroes, as before
  CHECK(b.to_host() == std::vector<float>{1, 2, 0, 0});
  CHECK(device::zero_fills() == fills + 1);
  CHECK(device::storage_allocations() == storage);
  b.resize_uninitialized(6); // beyond the capacity: grows, keeping the contents
  CHECK(b.size() == 6);
  CHECK(device::storage_allocations() == storage + 1);
  CHECK(b.to_host()[1] == 2.f);
}

TEST_CASE("host round trips: a training step's only reduction back to the host is the loss (model B)") {
  // Each Thrust algorithm that needs temporary storage is a reduction; on CUDA one whose result
  // comes back to the host waits for the device. BatchNorm's channel sums used to be four
  // reduce_by_key per layer and step (each copies its run count back: a sync); they now stay on
  // the device (device::SegmentedSum). What remains: the loss the step returns.
  using Net = models::ModelB;
  using In = Net::input_shape;
  Trainer<Net, Sgd<>, SingleDevice<Dev>> t(Sgd({.lr = 0.05, .momentum = 0.9}),
                                           {.batch_size = 16, .seed = 3, .log = nullptr});
  auto& engine = t.engine();
  const auto x = random_values(16 * In::size, 11);
  std::vector<std::int32_t> labels(16);
  for (std::size_t i = 0; i < 16; ++i) labels[i] = std::int32_t(i * 7 % 10);
  const auto& temporaries = *engine.context().temporaries;
  engine.step(ConstBatchView<In, float>(x.data(), 16), labels, {.step = 0});
  const auto before = temporaries.requests();
  for (std::uint64_t s = 1; s <= 3; ++s)
    engine.step(ConstBatchView<In, float>(x.data(), 16), labels, {.step = s, .forward_pass = s});
  MESSAGE("temporary-storage requests per step: " << double(temporaries.requests() - before) / 3);
  CHECK(temporaries.requests() - before == 3 * 1);
}
