// train_on_device's clock on the CPU (ThrustDevice on Thrust's OpenMP system): steady_clock, no
// profiler, no host waits to count (host and "device" are the same cores), no device memory.
#pragma once

#include <chrono>

#include <cohort/backend/thrust_device.hpp>

#include "train_on_device.hpp"

template <>
struct DeviceClock<cohort::ThrustDevice> {
  static constexpr const char* what = "steady_clock";
  explicit DeviceClock(int) {}
  void start() { t0_ = std::chrono::steady_clock::now(); }
  double stop_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }
  static void profile(bool) {}
  static std::uint64_t host_waits() { return 0; }
  static double device_used_mib(int) { return 0; }

 private:
  std::chrono::steady_clock::time_point t0_{};
};
using TrainOnDeviceBackend = cohort::ThrustDevice;
