// The device engines (train/engine/*_on_device.hpp) under the rules a GPU imposes and the
// OpenMP device system does not: a per-thread current device, an all-reduce that blocks until
// every peer has started it, staging memory tied to the current device.
// support/instrumented_device.hpp models each rule on the CPU. Issue 18's defects 1, 4 and 6.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/instrumented_device.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Net = models::ModelB; // convolutions, BatchNorm, dropout: every kernel family

template <class Policy>
std::vector<float> train_weights(const Bands& data, std::size_t epochs, int device, std::size_t batch = 24) {
  TrainerOptions o{.batch_size = batch, .seed = 7, .log = nullptr};
  o.parallel.device = device;
  o.parallel.replicas = 3;
  Trainer<Net, Sgd<>, Policy> t(Sgd<>({.lr = 0.05, .momentum = 0.9}), o);
  t.fit(data, epochs);
  return {t.parameters().values.begin(), t.parameters().values.end()};
}
} // namespace

TEST_CASE("device replicas: a replica without samples all-reduces inside the step's one phase") {
  // 26 samples in batches of 24: the second step gives 3 replicas 1, 1 and 0 samples. The
  // instrumented all-reduce blocks each replica until all have started the bucket (NCCL): a
  // replica that starts its buckets only after the others' backward returned is never reached.
  DeviceLog::get().reset();
  const Bands data(26, 3);
  const auto blocking = train_weights<ThreadedReplicas<dynamic_replicas, InstrumentedDevice>>(data, 2, 0);
  const auto plain = train_weights<ThreadedReplicas<dynamic_replicas, ThrustDevice>>(data, 2, 0);
  CHECK(blocking == plain); // the same sums in the same order: bitwise
  CHECK(std::all_of(blocking.begin(), blocking.end(), [](float v) { return std::isfinite(v); }));
}

namespace {
/// Two steps and an evaluation on `Policy`'s engine, the calling thread's current device
/// changed before each (an application that drives several GPUs, or another library). The
/// engine is driven directly: the Trainer's own activation (before every gather) must not hide
/// an engine that launches on whatever device is current.
template <class Policy>
void steps_after_the_caller_switches_device() {
  const Bands data(16, 4);
  cohort::EngineOptions o{.seed = 7};
  o.parallel.device = 2;
  o.parallel.replicas = 2;
  cohort::detail::TrainEngine<Policy, FullPrecision, Net, Sgd<>> engine(Sgd<>({.lr = 0.05}), o);
  const ConstBatchView<Net::input_shape, float> x(data.x.data(), data.size());
  current_device() = 0;
  engine.step(x, data.y, {.step = 0});
  current_device() = 5;
  engine.step(x, data.y, {.step = 1, .forward_pass = 1});
  current_device() = 0;
  engine.evaluate(x, data.y);
  CHECK(engine.parameters().values.size() > 0);
}
} // namespace

TEST_CASE("device engines: every call runs on the engine's device, whatever the caller made current") {
  DeviceLog::get().reset();
  SUBCASE("SingleDevice") { steps_after_the_caller_switches_device<SingleDevice<InstrumentedDevice>>(); }
  SUBCASE("ThreadedReplicas") {
    steps_after_the_caller_switches_device<ThreadedReplicas<dynamic_replicas, InstrumentedDevice>>();
  }
  CHECK(DeviceLog::get().wrong_device_launches.load() == 0);
}

TEST_CASE("Trainer: staging memory is allocated with the engine's device current, on the prefetch thread too") {
  DeviceLog::get().reset();
  const Bands data(50, 5);
  TrainerOptions o{.batch_size = 16, .seed = 7, .log = nullptr};
  o.parallel.device = 3;
  REQUIRE(o.prefetch);
  Trainer<Net, Sgd<>, SingleDevice<InstrumentedDevice>> t(Sgd<>({.lr = 0.05}), o);
  current_device() = 0;
  t.fit(data, 2);
  std::lock_guard<std::mutex> g(DeviceLog::get().mutex);
  const auto& seen = DeviceLog::get().staging_devices;
  REQUIRE(seen.size() >= 2); // both staging slots: one gathered on the prefetch thread
  for (int d : seen) CHECK(d == 3);
}

TEST_CASE("device replicas: more replicas than visible devices fail before anything is allocated") {
  DeviceLog::get().reset();
  DeviceLog::get().visible = 3;
  TrainerOptions o{.batch_size = 16, .seed = 7, .log = nullptr};
  o.parallel.device = 1;
  o.parallel.replicas = 3;
  using T = Trainer<Net, Sgd<>, ThreadedReplicas<dynamic_replicas, InstrumentedDevice>>;
  CHECK_THROWS_WITH_AS(T(Sgd<>({.lr = 0.05}), o),
                       doctest::Contains("ThreadedReplicas: 3 replicas on devices 1..3 (options.parallel.device and "
                                         "replicas), but this process sees 3"),
                       DeviceError);
  o.parallel.device = 0;
  CHECK_NOTHROW(T(Sgd<>({.lr = 0.05}), o));
  DeviceLog::get().reset();
}
