#pragma once
/// \file
/// How the replicas of `ThreadedReplicas<N, Backend>` on a device backend add up their
/// gradients, bucket by bucket while backward still runs (PyTorch DDP's overlap). The primary
/// template serves every backend whose replicas' memory one Thrust system reaches (the OpenMP
/// device system: ThrustDevice): the last replica to finish a bucket sums it in replica order
/// and gives every replica the total. The Cuda backend's replicas sit on different GPUs:
/// cohort/parallel/nccl.cuh specialises this for Cuda (an NCCL all-reduce per bucket on a
/// communication stream of each GPU).
///
/// The protocol, the same for every backend (each call on replica r's thread):
///
///     reduce.begin(grads);          // once per step, before the replicas' last backward
///     reduce.start(r, ctx, b);      // backward finished bucket b (buckets in order 0, 1, ...)
///     reduce.finish(r, ctx);        // starts any bucket r did not; r's kernels queued from now
///                                   // on see every sum
///     reduce.abandon(r);            // r failed mid-step: peers waiting for it throw instead
///
/// Every replica runs its part of a step (train, start, finish) concurrently with the others, on
/// its own thread: an implementation may block in start() or finish() until every peer got there.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>

#include <thrust/copy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

#include "cohort/backend/ops.hpp"
#include "cohort/core/error.hpp"
#include "cohort/parallel/gradient_buckets.hpp"

namespace cohort::device {

template <class Backend>
class ReplicaAllReduce {
  static_assert(!std::is_same_v<Backend, Cuda>,
                "ThreadedReplicas<N, Cuda>: replicas on different GPUs add their gradients with NCCL: #include "
                "<cohort/parallel/nccl.cuh> and link the cohort::nccl CMake target");
  using context = typename Backend::context;

 public:
  /// `timeout_s`: unused here (the replicas share memory; NCCL's waits have deadlines).
  ReplicaAllReduce(std::span<context> ctx, std::vector<GradientBucket> buckets, double /*timeout_s*/ = 300)
      : replicas_(ctx.size()), buckets_(std::move(buckets)), arrived_(new std::atomic<std::size_t>[buckets_.size()]),
        next_(replicas_, 0) {}

  /// The replicas' gradient stores for step `step` (replica r's at grads[r]).
  void begin(std::span<float* const> grads, std::uint64_t /*step*/ = 0) {
    grads_.assign(grads.begin(), grads.end());
    for (std::size_t b = 0; b < buckets_.size(); ++b) arrived_[b].store(0, std::memory_order_relaxed);
    std::fill(next_.begin(), next_.end(), 0);
    summed_.store(0, std::memory_order_release);
    abandoned_by_.store(none, std::memory_order_release);
  }

  /// Replica r's backward has finished bucket b. The last replica to get here sums the bucket
  /// (in replica order, so the result does not depend on which thread that is) while the
  /// others go on with earlier layers, whose gradients lie outside the bucket.
  void start(std::size_t r, context& ctx, std::size_t b) {
    if (b != next_[r])
      throw DistributedError(
          cohort::detail::concat("replica ", r, ": gradient bucket ", b, " started before bucket ", next_[r]));
    ++next_[r];
    if (arrived_[b].fetch_add(1, std::memory_order_acq_rel) + 1 < replicas_) return;
    const GradientBucket& k = buckets_[b];
    auto policy = ctx.policy();
    float* total = grads_[0] + k.begin;
    for (std::size_t r = 1; r < replicas_; ++r)
      thrust::transform(policy, total, total + k.size(), grads_[r] + k.begin, total, thrust::plus<float>{});
    for (std::size_t r = 1; r < replicas_; ++r) thrust::copy(policy, total, total + k.size(), grads_[r] + k.begin);
    summed_.fetch_add(1, std::memory_order_acq_rel);
  }

  /// Starts the buckets replica r's backward did not (a replica without samples), then returns
  /// once every replica has started every bucket and all are summed.
  void finish(std::size_t r, context& ctx) {
    while (next_[r] < buckets_.size()) start(r, ctx, next_[r]);
    while (summed_.load(std::memory_order_acquire) < buckets_.size()) {
      if (const std::size_t q = abandoned_by_.load(std::memory_order_acquire); q != none)
        throw DistributedError(cohort::detail::concat("replica ", r,
                                                      ": the gradient all-reduce was abandoned: replica ", q,
                                                      " failed during the step (see its error)"));
      std::this_thread::yield();
    }
  }

  /// Replica r failed during the step: the replicas waiting in finish() for its buckets throw.
  void abandon(std::size_t r) noexcept {
    std::size_t expected = none;
    abandoned_by_.compare_exchange_strong(expected, r, std::memory_order_acq_rel);
  }

  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }

 private:
  static constexpr std::size_t none = std::size_t(-1);

  std::size_t replicas_;
  std::vector<GradientBucket> buckets_;
  std::unique_ptr<std::atomic<std::size_t>[]> arrived_; // replicas that finished each bucket
  std::atomic<std::size_t> summed_{0};                  // buckets summed this step
  std::atomic<std::size_t> abandoned_by_{none};         // the first replica that failed this step
  std::vector<std::size_t> next_;                       // each replica's next bucket (they start in order)
  std::vector<float*> grads_;
};

} // namespace cohort::device
