#pragma once
/// \file
/// The default parallel policy: one device, one network instance.
/// Example (compiled: tests/docs/headers.cpp, "parallel/single_device"):
///
///     cohort::Trainer<Net, cohort::Adam<>, cohort::SingleDevice<>> trainer(opt);   // the default

#include <cstddef>
#include <string_view>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/parallel/policy.hpp"

namespace cohort {

/// `SingleDevice<Backend = Cpu>`: train one network on one device. On the CPU the device's
/// threads come from the global pool (`set_num_threads`).
template <class Backend = Cpu>
struct SingleDevice {
  using backend = Backend;
  static constexpr std::string_view name = "SingleDevice";
  /// Network instances that compute gradients in one step.
  static constexpr std::size_t replicas = 1;
};

} // namespace cohort
