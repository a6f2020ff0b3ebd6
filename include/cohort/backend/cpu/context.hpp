#pragma once
/// \file
/// The CPU backend's tag and its run-time context.
///
///     cohort::Network<Net, float, cohort::Cpu> net;   // Cpu is the default backend

#include <cstddef>

#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Run-time state the CPU kernels share: the thread pool they split work over (the process's
/// global pool unless a replica is given its own).
struct CpuContext {
  ThreadPool* pool = &ThreadPool::global();
  ThreadPool& threads() const noexcept { return *pool; }
};

/// The CPU backend: host memory, kernels in cohort/backend/cpu/.
struct Cpu {
  using context = CpuContext;
  template <class U>
  using buffer = HostBuffer<U>;
  static constexpr const char* name = "cpu";
  static constexpr bool host_memory = true;
};

} // namespace cohort
