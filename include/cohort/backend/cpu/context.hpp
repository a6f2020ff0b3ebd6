#pragma once
/// \file
/// The CPU backend's tag and its run-time context.
///
///     cohort::Network<Net, float, cohort::Cpu> net;   // Cpu is the default backend

#include <cstddef>

#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Run-time state the CPU kernels share: how many threads they may use.
struct CpuContext {
  std::size_t threads = 1;
};

/// The CPU backend: host memory, kernels in cohort/backend/cpu/.
struct Cpu {
  using context = CpuContext;
  template <class U>
  using buffer = HostBuffer<U>;
  static constexpr const char* name = "cpu";
};

} // namespace cohort
