// device::pack_gradients / unpack_gradients (backend/device/gradient_packing.hpp) on ThrustDevice:
// the device engines' compressed buckets round exactly as the CPU engine does (bf16 and fp16,
// with and without error feedback), and widening back is exact.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <cohort/backend/device/device_buffer.hpp>
#include <cohort/backend/device/gradient_packing.hpp>
#include <cohort/backend/thrust_device.hpp>

#include "support/awkward_gradients.hpp"

using namespace cohort;

TEST_CASE("device gradient packing: the CPU engine's rounding bit for bit, the residual carried across steps") {
  constexpr std::size_t n = 5000;
  for (const GradientCompression c : {GradientCompression::bf16, GradientCompression::fp16}) {
    for (const bool feedback : {false, true}) {
      CAPTURE(compression_name(c));
      CAPTURE(feedback);
      std::vector<float> residual(n, 0.f);
      DeviceBuffer<float> g_dev, residual_dev(n);
      DeviceBuffer<std::uint16_t> wire_dev(n);
      for (std::uint32_t step = 0; step < 3; ++step) {
        const std::vector<float> g = test::awkward_gradients(n, 3 + step);
        std::vector<std::uint16_t> wire(n);
        detail::pack_gradients(c, g.data(), wire.data(), n, feedback ? residual.data() : nullptr);
        g_dev.assign_from_host(g.data(), n);
        device::pack_gradients(thrust::device, c, g_dev.data(), wire_dev.data(), n,
                               feedback ? residual_dev.data() : nullptr);
        CHECK(wire_dev.to_host() == wire);
        CHECK(residual_dev.to_host() == (feedback ? residual : std::vector<float>(n, 0.f)));
        // Widening: exact, and the same as the host's.
        std::vector<float> host_wide(n);
        detail::unpack_gradients(c, wire.data(), host_wide.data(), n);
        device::unpack_gradients(thrust::device, c, wire_dev.data(), g_dev.data(), n);
        const std::vector<float> wide = g_dev.to_host();
        CHECK(std::memcmp(wide.data(), host_wide.data(), n * sizeof(float)) == 0);
      }
    }
  }
  // The rounding itself, on values whose result is known: a bf16 tie goes to even, fp16
  // overflows to infinity and flushes what is below half its smallest subnormal to zero.
  using cohort::detail::from_wire;
  using cohort::detail::to_wire;
  CHECK(from_wire(GradientCompression::bf16, to_wire(GradientCompression::bf16, 1.0f + 1.0f / 256)) == 1.0f);
  CHECK(from_wire(GradientCompression::fp16, to_wire(GradientCompression::fp16, 7e4f)) == INFINITY);
  CHECK(from_wire(GradientCompression::fp16, to_wire(GradientCompression::fp16, 1e-9f)) == 0.0f);
  // Error feedback through an overflow: the step's value is inf, but the residual restarts at
  // zero instead of carrying inf (which would make every later step of the element inf or NaN).
  float r = 0.f;
  CHECK(cohort::detail::pack_gradient(GradientCompression::fp16, 1e5f, &r) == 0x7C00);
  CHECK(r == 0.f);
  CHECK(from_wire(GradientCompression::fp16, cohort::detail::pack_gradient(GradientCompression::fp16, 0.5f, &r)) ==
        0.5f);
  CHECK(r == 0.f);
}
