#pragma once
// DeviceBuffer: HostBuffer's growth rules (grow, never shrink; new elements zeroed) on device
// memory, and the copies across the host/device boundary.
#include <doctest/doctest.h>

#include "support/device_harness.hpp"

using namespace cohort;

TEST_CASE("DeviceBuffer: round trip, growth keeps contents, regrowth after a shrink is zeroed") {
  DeviceBuffer<float> b;
  CHECK(b.empty());
  const std::vector<float> v{1, 2, 3, 4, 5};
  b.assign_from_host(v.data(), v.size());
  CHECK(b.to_host() == v);
  b.resize(8);
  CHECK(b.to_host() == std::vector<float>{1, 2, 3, 4, 5, 0, 0, 0});
  const std::size_t cap = b.capacity();
  b.resize(2);
  b.resize(4); // within capacity: no reallocation, and the old 3 and 4 must not come back
  CHECK(b.capacity() == cap);
  CHECK(b.to_host() == std::vector<float>{1, 2, 0, 0});
  b.fill(7.f);
  CHECK(b.to_host() == std::vector<float>{7, 7, 7, 7});
  CHECK(copy_to_host(b.data() + 1, 2) == std::vector<float>{7, 7});
}

TEST_CASE("Parameters: a device network initialises bitwise like the CPU one and copies back and forth") {
  using Net = Sequential<Input<2, 6, 6>, Conv2d<2, 3, 3>, BatchNorm2d<3>, Flatten, Linear<48, 4>>;
  Network<Net> cpu(11);
  Network<Net, float, Dev> dev(11);
  Parameters<Net, float, Cpu> back;
  back.copy_from(dev.parameters());
  CHECK(std::vector<float>(back.values.begin(), back.values.end()) ==
        std::vector<float>(cpu.parameters().values.begin(), cpu.parameters().values.end()));
  CHECK(std::vector<float>(back.buffers.begin(), back.buffers.end()) ==
        std::vector<float>(cpu.parameters().buffers.begin(), cpu.parameters().buffers.end()));
  // Host edits reach the device and come back unchanged.
  back.values[0] = 42.f;
  dev.parameters().copy_from(back);
  CHECK(dev.parameters().values.to_host()[0] == 42.f);
}
