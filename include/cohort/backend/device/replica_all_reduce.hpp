#pragma once
/// \file
/// How the replicas of `ThreadedReplicas<N, Backend>` on a device backend add up their
/// gradients. The primary template sums them in replica order with Thrust and gives every
/// replica the total: right when all replicas' memory is reachable from one Thrust system (the
/// OpenMP device system: ThrustDevice). The Cuda backend's replicas sit on different GPUs:
/// cohort/parallel/nccl.cuh specialises this for Cuda with an NCCL all-reduce.

#include <cstddef>
#include <span>
#include <type_traits>

#include <thrust/copy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

#include "cohort/backend/ops.hpp"

namespace cohort::device {

template <class Backend>
class ReplicaAllReduce {
  static_assert(!std::is_same_v<Backend, Cuda>,
                "ThreadedReplicas<N, Cuda>: replicas on different GPUs add their gradients with NCCL: #include "
                "<cohort/parallel/nccl.cuh> and link the cohort::nccl CMake target");

 public:
  explicit ReplicaAllReduce(std::span<typename Backend::context> /*one per replica*/) {}

  /// grads[r] = sum over every replica's grads (n floats each), for every r; the sum is taken
  /// in replica order, so the result does not depend on timing.
  void sum(std::span<typename Backend::context> ctx, std::span<float* const> grads, std::size_t n) {
    if (grads.size() < 2) return;
    auto policy = ctx[0].policy();
    for (std::size_t r = 1; r < grads.size(); ++r)
      thrust::transform(policy, grads[0], grads[0] + n, grads[r], grads[0], thrust::plus<float>{});
    for (std::size_t r = 1; r < grads.size(); ++r) thrust::copy(policy, grads[0], grads[0] + n, grads[r]);
  }
};

} // namespace cohort::device
