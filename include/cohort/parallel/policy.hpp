#pragma once
/// \file
/// What a parallel policy is, and the run-time options all data-parallel policies share.
/// Example (compiled: tests/docs/headers.cpp, "parallel/policy"):
///
///     cohort::TrainerOptions o;
///     o.parallel.deterministic = true;   // bitwise the same weights for any replica count / world size

#include <concepts>
#include <cstddef>
#include <string_view>

#include "cohort/parallel/gradient_compression.hpp"

namespace cohort {

/// A parallel policy: how many replicas compute a step, on which backend, and how they agree.
/// Policies are empty tags with constants (`SingleDevice<>`, `ThreadedReplicas<2>`,
/// `ProcessGroupDDP<Mpi>`); run-time state lives in the trainer's engine.
template <class P>
concept ParallelPolicy = requires {
  typename P::backend;
  { P::name } -> std::convertible_to<std::string_view>;
  { P::replicas } -> std::convertible_to<std::size_t>;
};

namespace detail {
/// A policy's communicator type is defined here (ProcessGroupDDP<Nccl> names one that only
/// cohort/parallel/nccl.cuh defines); true for policies without one.
template <class P>
inline constexpr bool communicator_available = [] {
  if constexpr (requires { typename P::communicator; }) return requires {
      sizeof(typename P::communicator);
    };
  else
    return true;
}();
} // namespace detail

/// Run-time knobs of the data-parallel policies (ignored by SingleDevice but for `device`).
struct DataParallelOptions {
  /// GPU backends: the device SingleDevice<Cuda> trains on (its index among the visible ones).
  int device = 0;
  /// ThreadedReplicas: intra-op threads of each replica (replicas x threads should not exceed
  /// the cores: the replicas' pools are separate). 0: a Trainer divides its threads
  /// (TrainerOptions::threads, or every core the process may use) among the replicas, at least
  /// one each; an engine built without a Trainer gives each replica one.
  std::size_t threads_per_replica = 0;
  /// ThreadedReplicas<dynamic_replicas>: the number of replicas.
  std::size_t replicas = 2;
  /// ProcessGroupDDP: gradients are all-reduced in contiguous buckets of about this many KiB,
  /// each started as soon as backward has finished its layers (PyTorch's bucket_cap_mb).
  std::size_t bucket_kib = 1024;
  /// Bitwise-identical weights whatever the replica count or world size: the global batch is
  /// cut into `deterministic_chunks` micro-batches (sample i goes to chunk i mod chunks), each
  /// chunk's gradient is computed on its own and the chunks are summed in a fixed order. The
  /// replica count or world size must divide the chunk count. Costs smaller kernel batches and
  /// an all-gather instead of an all-reduce (bench/RESULTS.md). BatchNorm then uses per-chunk
  /// statistics.
  bool deterministic = false;
  std::size_t deterministic_chunks = 4;
  /// ProcessGroupDDP (every backend and Comm): gradient buckets travel and are summed as bf16 or
  /// fp16, half the bytes of float (parallel/gradient_compression.hpp); none: float, as by
  /// default in PyTorch. Every rank must use the same; other policies refuse it.
  GradientCompression compression = GradientCompression::none;
  /// With compression: each rank adds what rounding dropped to its next gradient (error
  /// feedback), so the error is delayed rather than lost.
  bool error_feedback = false;
  /// Cuda: float GEMMs may round their inputs to TF32 on tensor cores (10-bit mantissas; torch's
  /// `torch.backends.cuda.matmul.allow_tf32`). Off, as in PyTorch: results then match the
  /// CPU's within float rounding.
  bool allow_tf32 = false;
  /// ProcessGroupDDP: a collective that has not completed after this many seconds fails with
  /// the missing rank(s), the operation and the step on every rank that is still alive.
  /// ThreadedReplicas<N, Cuda>: the deadline of each wait on NCCL (communicator creation, the end
  /// of a step's all-reduce); the communicators are then aborted.
  double timeout_s = 300;
};

} // namespace cohort
