// device::SegmentedSum (backend/device/segmented_sum.hpp) on ThrustDevice: every segment's sum,
// for lengths that leave the first launch one thread, a partial block, or several levels of
// partial sums; exact on integer terms (so any lost or doubled term shows).
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include <cohort/backend/device/device_buffer.hpp>
#include <cohort/backend/device/segmented_sum.hpp>
#include <cohort/backend/thrust_device.hpp>

using namespace cohort;

namespace {
/// Term j: an integer that differs between neighbours and segments, so a skipped, repeated or
/// misplaced term changes the sum.
struct IntegerTerm {
  COHORT_HOST_DEVICE double operator()(std::size_t j) const { return double((j * 7919) % 1009) - 500.0; }
};
} // namespace

TEST_CASE("device segmented sum: every segment, every length, exact on integer terms") {
  device::SegmentedSum sums;
  constexpr std::size_t per = device::SegmentedSum::terms_per_thread, fan = device::SegmentedSum::fan_in;
  for (const std::size_t segments : {std::size_t(1), std::size_t(3), std::size_t(32)}) {
    for (const std::size_t length : {std::size_t(0), std::size_t(1), per - 1, per, per + 1, per * fan, per * fan + 1,
                                     per * fan * fan + 3, std::size_t(78400)}) {
      CAPTURE(segments);
      CAPTURE(length);
      DeviceBuffer<double> out(segments);
      sums(thrust::device, segments, length, IntegerTerm{}, out.data());
      std::vector<double> expected(segments, 0.0);
      for (std::size_t s = 0; s < segments; ++s)
        for (std::size_t j = 0; j < length; ++j) expected[s] += IntegerTerm{}(s * length + j);
      CHECK(out.to_host() == expected);
    }
  }
}
