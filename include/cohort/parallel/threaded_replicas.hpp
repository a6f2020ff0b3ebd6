#pragma once
/// \file
/// `ThreadedReplicas<N>`: torch.nn.DataParallel in one process, without the GIL and without
/// copying the model every step.
/// Example (compiled: tests/docs/headers.cpp, "parallel/threaded_replicas"):
///
///     cohort::Trainer<Net, cohort::Sgd<>, cohort::ThreadedReplicas<2>> trainer(opt, {.batch_size = 128});
///
/// N replicas share one set of parameters; each has its own executor, gradient store and
/// intra-op threads (`DataParallelOptions::threads_per_replica`) and runs on its own thread with
/// its share of every batch. Gradients are summed in replica order (bitwise reproducible), one
/// optimiser step updates the shared parameters. BatchNorm uses each replica's batch statistics
/// and only replica 0 updates the running statistics (DistributedDataParallel's semantics).

#include <cstddef>
#include <string_view>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/parallel/policy.hpp"

namespace cohort {

/// The replica count of `ThreadedReplicas<dynamic_replicas>`: chosen at run time
/// (`DataParallelOptions::replicas`, e.g. from a command line).
inline constexpr std::size_t dynamic_replicas = 0;

/// `ThreadedReplicas<N, Backend = Cpu>`: N replicas in one process, one thread each
/// (N = dynamic_replicas: as many as DataParallelOptions::replicas says).
template <std::size_t N, class Backend = Cpu>
struct ThreadedReplicas {
  using backend = Backend;
  static constexpr std::string_view name = "ThreadedReplicas";
  static constexpr std::size_t replicas = N;
};

} // namespace cohort
