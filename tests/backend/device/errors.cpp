// Device errors (backend/device/errors.hpp): Thrust's own exceptions leave the device engines as
// cohort::DeviceError naming the operation and the device (CudaError, a DeviceError, on Cuda).
#include <doctest/doctest.h>

#include <cstddef>
#include <string>

#include <cohort/backend/thrust_device.hpp>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"

using namespace cohort;

TEST_CASE("device errors: a failed Thrust allocation is a DeviceError naming the operation and the device") {
  ThrustDeviceContext ctx;
  // 128 TiB: more than any process's address space, so the allocation fails everywhere.
  CHECK_THROWS_WITH_AS(
      ctx.translate_errors("growing a buffer", [] { DeviceBuffer<float>().resize(std::size_t(1) << 45); }),
      doctest::Contains("growing a buffer failed: out of memory"), DeviceError);
  try {
    ctx.translate_errors("growing a buffer", [] { DeviceBuffer<float>().resize(std::size_t(1) << 45); });
  } catch (const DeviceError& e) {
    CHECK(std::string(e.what()).ends_with(" on the Thrust device system"));
  }
}

TEST_CASE("device errors: a Thrust system_error becomes a DeviceError, and cohort's own errors pass unchanged") {
  ThrustDeviceContext ctx;
  CHECK_THROWS_WITH_AS(
      ctx.translate_errors(
          "the training step",
          [] { throw thrust::system_error(thrust::error_code(5, thrust::system_category()), "parallel_for"); }),
      doctest::Contains("the training step failed in a Thrust algorithm: parallel_for"), DeviceError);
  CHECK_THROWS_AS(ctx.translate_errors("the training step", [] { throw ValueError("label 12 >= 10 classes"); }),
                  ValueError);
  CHECK(ctx.translate_errors("nothing", [] { return 7; }) == 7); // results pass through
}

namespace {
// Labels beyond the model's 10 classes: the engine's error translation must not hide them.
// (At namespace scope: a local class's `using shape` trips -Wunused-local-typedefs.)
struct BadLabels {
  using shape = cohort::Shape<1, 28, 28>;
  const cohort::test::Bands& d;
  std::size_t size() const { return d.size(); }
  const float* image(std::size_t i) const { return d.image(i); }
  std::int32_t label(std::size_t i) const { return i == 5 ? 12 : d.label(i); }
};
} // namespace

TEST_CASE("device errors: a bad label in a device trainer is still the ValueError naming it") {
  test::Bands data(48, 1);
  BadLabels bad{data};
  Trainer<models::ModelC, Sgd<>, SingleDevice<ThrustDevice>> t(Sgd({.lr = 0.01}), {.batch_size = 16, .log = nullptr});
  CHECK_THROWS_AS(t.fit(bad, 1), ValueError);
}
