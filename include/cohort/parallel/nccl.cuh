#pragma once
/// \file
/// NCCL for the Cuda backend: the gradient all-reduce of `ThreadedReplicas<N, Cuda>` (one
/// communicator per GPU of the process, from ncclCommInitAll) and of `ProcessGroupDDP<Nccl, Cuda>`
/// (one process per GPU: rank 0's NCCL unique id broadcast over MPI, ncclCommInitRank, as Horovod
/// does). CUDA code: compile with nvcc, link cohort::nccl (which brings MPI).
///
///     #include <cohort/parallel/nccl.cuh>
///     cohort::Trainer<Net, cohort::Sgd<>, cohort::ThreadedReplicas<4, cohort::Cuda>> trainer(opt, options);
///
/// Every NCCL call is checked: a failure is a CudaError naming the call, the device and the rank.

#if !defined(__CUDACC__)
#error "cohort/parallel/nccl.cuh is CUDA code: compile it with nvcc (CMake: a .cu source linked to cohort::nccl)"
#endif

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <nccl.h>

#include "cohort/backend/cuda.cuh"
#include "cohort/backend/cuda/stream.cuh"
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/mpi.hpp"
#include "cohort/parallel/gradient_buckets.hpp"

namespace cohort {

/// NCCL between GPUs (ProcessGroupDDP<Nccl, Cuda>: declared in parallel/process_group_ddp.hpp).
struct Nccl {
  static constexpr std::string_view name = "Nccl";
};

namespace gpu::detail {
inline void check(ncclResult_t r, const char* call, int device) {
  if (r != ncclSuccess)
    throw CudaError(cohort::detail::concat(call, " failed: ", ncclGetErrorString(r), where(device)));
}
} // namespace gpu::detail

namespace gpu {
/// One NCCL communicator per device of this process (ncclCommInitAll), destroyed with it.
class NcclCommunicators {
 public:
  explicit NcclCommunicators(std::vector<int> devices) : devices_(std::move(devices)), comms_(devices_.size()) {
    COHORT_CUDA_CHECK(ncclCommInitAll(comms_.data(), int(comms_.size()), devices_.data()), devices_.front());
  }
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;
  ~NcclCommunicators() {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c); // no throwing from a destructor
  }
  ncclComm_t operator[](std::size_t r) const noexcept { return comms_[r]; }
  std::size_t size() const noexcept { return comms_.size(); }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};
} // namespace gpu

namespace gpu {
/// One GPU's side of a bucketed gradient all-reduce: each bucket's ncclAllReduce runs on a
/// communication stream of its own once the compute stream has produced the bucket (an event),
/// so it overlaps the backward kernels of earlier layers; finish() makes the compute stream
/// wait for the last one. Nothing here blocks the host.
class BucketedAllReduce {
 public:
  BucketedAllReduce(ncclComm_t comm, int device, std::span<const GradientBucket> buckets)
      : comm_(comm), device_(device), buckets_(buckets.begin(), buckets.end()), stream_(device), done_(device) {
    ready_.reserve(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) ready_.emplace_back(device);
  }
  void begin(float* grads) noexcept { grads_ = grads, next_ = 0; }
  /// Backward (queued on `compute`) has produced bucket b: all-reduce it on the communication
  /// stream. Buckets start in order on every GPU (NCCL matches calls by order).
  void start(cudaStream_t compute, std::size_t b) {
    if (b != next_)
      throw DistributedError(
          cohort::detail::concat("gradient bucket ", b, " started before bucket ", next_, gpu::detail::where(device_)));
    const GradientBucket& k = buckets_[b];
    ready_[b].record(compute);
    stream_.wait(ready_[b]);
    COHORT_CUDA_CHECK(
        ncclAllReduce(grads_ + k.begin, grads_ + k.begin, k.size(), ncclFloat, ncclSum, comm_, stream_.get()), device_);
    ++next_;
  }
  /// Starts the buckets backward did not (a replica without samples), then makes `compute` wait
  /// for every bucket's sum.
  void finish(cudaStream_t compute) {
    while (next_ < buckets_.size()) start(compute, next_);
    done_.record(stream_.get());
    stream_wait(compute, done_, device_);
  }

 private:
  ncclComm_t comm_;
  int device_;
  std::vector<GradientBucket> buckets_;
  Stream stream_;
  std::vector<Event> ready_; // one per bucket: the compute stream has produced it
  Event done_;               // the communication stream has summed every bucket
  float* grads_ = nullptr;
  std::size_t next_ = 0;
};
} // namespace gpu

/// ThreadedReplicas<N, Cuda>: each replica's thread all-reduces its buckets over its own
/// communicator (from ncclCommInitAll) on its GPU's communication stream, as backward produces
/// them; NCCL allows one thread per device without group calls.
template <>
class device::ReplicaAllReduce<Cuda> {
 public:
  ReplicaAllReduce(std::span<CudaContext> ctx, std::vector<GradientBucket> buckets)
      : buckets_(std::move(buckets)), comms_(devices_of(ctx)) {
    for (std::size_t r = 0; r < ctx.size(); ++r)
      per_gpu_.push_back(std::make_unique<gpu::BucketedAllReduce>(comms_[r], ctx[r].device, buckets_));
  }
  void begin(std::span<float* const> grads) {
    for (std::size_t r = 0; r < grads.size(); ++r) per_gpu_[r]->begin(grads[r]);
  }
  void start(std::size_t r, CudaContext& ctx, std::size_t b) { per_gpu_[r]->start(ctx.stream, b); }
  void finish(std::size_t r, CudaContext& ctx) { per_gpu_[r]->finish(ctx.stream); }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }

 private:
  static std::vector<int> devices_of(std::span<CudaContext> ctx) {
    std::vector<int> d;
    for (const CudaContext& c : ctx) d.push_back(c.device);
    return d;
  }
  std::vector<GradientBucket> buckets_;
  gpu::NcclCommunicators comms_;
  std::vector<std::unique_ptr<gpu::BucketedAllReduce>> per_gpu_;
};

/// ProcessGroupDDP<Nccl, Cuda>: this rank's buckets all-reduced with every other rank's on its
/// GPU's communication stream as backward produces them; the communicator is built from rank
/// 0's unique id, sent over MPI.
template <>
class device::RankAllReduce<Nccl, Cuda> {
 public:
  RankAllReduce(MpiCommunicator& mpi, CudaContext& ctx, std::vector<GradientBucket> buckets)
      : buckets_(std::move(buckets)) {
    ncclUniqueId id{};
    if (mpi.rank() == 0) COHORT_CUDA_CHECK(ncclGetUniqueId(&id), ctx.device);
    mpi.broadcast(&id, sizeof id, 0, "the broadcast of the NCCL unique id");
    COHORT_CUDA_CHECK(ncclCommInitRank(&comm_, mpi.size(), id, mpi.rank()), ctx.device);
    gpu_ = std::make_unique<gpu::BucketedAllReduce>(comm_, ctx.device, buckets_);
  }
  RankAllReduce(const RankAllReduce&) = delete;
  RankAllReduce& operator=(const RankAllReduce&) = delete;
  ~RankAllReduce() {
    gpu_.reset();
    if (comm_) ncclCommDestroy(comm_); // no throwing from a destructor
  }
  void begin(float* grads) { gpu_->begin(grads); }
  void start(MpiCommunicator&, CudaContext& ctx, std::size_t b) { gpu_->start(ctx.stream, b); }
  void finish(MpiCommunicator&, CudaContext& ctx) { gpu_->finish(ctx.stream); }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }

 private:
  std::vector<GradientBucket> buckets_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<gpu::BucketedAllReduce> gpu_;
};

} // namespace cohort
