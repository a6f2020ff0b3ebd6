#pragma once
/// \file
/// NCCL for the Cuda backend: the gradient all-reduce of `ThreadedReplicas<N, Cuda>` (one
/// communicator per GPU of the process, created together in one NCCL group) and of
/// `ProcessGroupDDP<Nccl, Cuda>` (one process per GPU: rank 0's NCCL unique id broadcast over
/// MPI, ncclCommInitRankConfig, as Horovod does). CUDA code: compile with nvcc, link cohort::nccl
/// (which brings MPI).
/// Example (not compiled: CUDA code; tests/cuda/nccl/ builds such trainers with nvcc):
///
///     #include <cohort/parallel/nccl.cuh>
///     cohort::Trainer<Net, cohort::Sgd<>, cohort::ThreadedReplicas<4, cohort::Cuda>> trainer(opt, options);
///
/// Failures become errors, never hangs (issue 18). Every communicator is non-blocking
/// (`ncclConfig_t::blocking = 0`): its creation and each step's all-reduce are waited for by the
/// host under `options.parallel.timeout_s` (parallel/collective_watchdog.hpp), polling
/// ncclCommGetAsyncError. An asynchronous error, the deadline, or a peer that gave up aborts the
/// communicator (ncclCommAbort, so no kernel is left spinning for a dead peer) and throws a
/// DistributedError naming the rank (or replica and GPU), the operation and the step. Under
/// ProcessGroupDDP the wait is MpiCommunicator's: it beats on the liveness channel, names the
/// silent ranks at the deadline, and a rank that gives up tells the others, which then fail at
/// once. The step's one host synchronisation is that wait, in finish(). Destructors never throw
/// and never wait past the deadline: ncclCommFinalize, then ncclCommDestroy once quiescent, else
/// ncclCommAbort (at once after a failure).

#if !defined(__CUDACC__)
#error "cohort/parallel/nccl.cuh is CUDA code: compile it with nvcc (CMake: a .cu source linked to cohort::nccl)"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <nccl.h>

#include "cohort/backend/cuda.cuh"
#include "cohort/backend/cuda/stream.cuh"
#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/gradient_packing.hpp"
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/mpi.hpp"
#include "cohort/parallel/collective_watchdog.hpp"
#include "cohort/parallel/gradient_buckets.hpp"
#include "cohort/parallel/nccl_communicator.cuh"

namespace cohort {

namespace gpu {
/// One GPU's side of a bucketed gradient all-reduce: each bucket's ncclAllReduce runs on a
/// communication stream of its own once the compute stream has produced the bucket (an event),
/// so it overlaps the backward kernels of earlier layers. start() does not block the host;
/// finish() waits until every bucket is summed, through `watch(NcclOperation&, what)` (a
/// watchdog: deadline, asynchronous errors, abort), then makes the compute stream wait too.
///
/// With compression (ProcessGroupDDP's options.parallel.compression) each bucket is packed to
/// bf16 / fp16 on the communication stream (device/gradient_packing.hpp: the CPU engine's
/// rounding, error feedback included), all-reduced as ncclBfloat16 / ncclFloat16 (NCCL rounds
/// every partial sum to the 16-bit type) and widened back into the float gradients there.
class BucketedAllReduce {
 public:
  BucketedAllReduce(NcclComm& comm, std::span<const GradientBucket> buckets, const BucketCompression& compression = {})
      : comm_(comm), device_(comm.device()), buckets_(buckets.begin(), buckets.end()), stream_(device_), done_(device_),
        compression_(compression.format) {
    ready_.reserve(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) ready_.emplace_back(device_);
    if (compressed()) {
      std::size_t n = 0;
      for (const GradientBucket& k : buckets_) n = std::max(n, k.end);
      gpu::detail::DeviceGuard on(device_); // the buffers live on this communicator's GPU
      wire_.resize(n);
      if (compression.error_feedback) residual_.resize(n); // zeroed
    }
  }
  /// Error feedback: what rounding has dropped so far (empty without it), and its replacement
  /// (a checkpoint's; between steps, when the communication stream is idle).
  std::vector<float> residual() const {
    gpu::detail::DeviceGuard on(device_);
    return residual_.to_host();
  }
  void set_residual(const std::vector<float>& r) {
    gpu::detail::DeviceGuard on(device_);
    residual_.assign_from_host(r.data(), r.size());
  }
  void begin(float* grads) noexcept { grads_ = grads, next_ = 0; }
  /// Backward (queued on `compute`) has produced bucket b: all-reduce it on the communication
  /// stream. Buckets start in order on every GPU (NCCL matches calls by order).
  template <class Watch>
  void start(cudaStream_t compute, std::size_t b, Watch&& watch) {
    if (b != next_)
      throw DistributedError(
          cohort::detail::concat("gradient bucket ", b, " started before bucket ", next_, gpu::detail::where(device_)));
    auto what = [b] { return cohort::detail::concat("the start of the all-reduce of gradient bucket ", b); };
    if (comm_.aborted()) {
      NcclOperation op(comm_);
      watch(op, what()); // fails at once: "the communicator was aborted after an earlier failure"
    }
    const GradientBucket& k = buckets_[b];
    ready_[b].record(compute);
    stream_.wait(ready_[b]);
    ncclResult_t r = ncclSuccess;
    if (compressed()) {
      const auto on_stream = thrust::cuda::par_nosync.on(stream_.get());
      std::uint16_t* wire = wire_.data() + k.begin;
      device::pack_gradients(on_stream, compression_, grads_ + k.begin, wire, k.size(),
                             residual_.size() ? residual_.data() + k.begin : nullptr);
      r = ncclAllReduce(wire, wire, k.size(), compression_ == GradientCompression::fp16 ? ncclFloat16 : ncclBfloat16,
                        ncclSum, comm_.get(), stream_.get());
    } else {
      r = ncclAllReduce(grads_ + k.begin, grads_ + k.begin, k.size(), ncclFloat, ncclSum, comm_.get(), stream_.get());
    }
    if (r != ncclSuccess) { // ncclInProgress: still being enqueued (non-blocking), wait; else fail at once
      NcclOperation op(comm_, nullptr, r == ncclInProgress ? ncclSuccess : r);
      watch(op, what());
    }
    if (compressed()) // queued behind the all-reduce (enqueued now: the wait above)
      device::unpack_gradients(thrust::cuda::par_nosync.on(stream_.get()), compression_, wire_.data() + k.begin,
                               grads_ + k.begin, k.size());
    ++next_;
  }
  /// Starts the buckets backward did not (a replica without samples), waits until every
  /// bucket's sum is complete, and makes `compute` wait for it.
  template <class Watch>
  void finish(cudaStream_t compute, Watch&& watch) {
    while (next_ < buckets_.size()) start(compute, next_, watch);
    done_.record(stream_.get());
    NcclOperation op(comm_, done_.get());
    watch(op, cohort::detail::concat("the all-reduce of ", buckets_.size(), " gradient bucket",
                                     buckets_.size() == 1 ? "" : "s"));
    stream_wait(compute, done_, device_);
  }

 private:
  bool compressed() const noexcept { return compression_ != GradientCompression::none; }

  NcclComm& comm_;
  int device_;
  std::vector<GradientBucket> buckets_;
  Stream stream_;
  std::vector<Event> ready_; // one per bucket: the compute stream has produced it
  Event done_;               // the communication stream has summed every bucket
  GradientCompression compression_;
  DeviceBuffer<std::uint16_t> wire_; // compressed: the packed buckets, summed in place by NCCL
  DeviceBuffer<float> residual_;     // error feedback
  float* grads_ = nullptr;
  std::size_t next_ = 0;
};
} // namespace gpu

/// ThreadedReplicas<N, Cuda>: each replica's thread all-reduces its buckets over its own
/// communicator on its GPU's communication stream, as backward produces them; NCCL allows one
/// thread per device without group calls. `timeout_s` (options.parallel.timeout_s) bounds the
/// creation and each step's wait; a replica that fails or abandons the step (abandon(r)) makes
/// the others fail at once instead of waiting for its buckets.
template <>
class device::ReplicaAllReduce<Cuda> {
  // Defined before its callers: they need its deduced type.
  /// Replica r's watchdog: its deadline, and the others' failures while it waits.
  auto watch(std::size_t r) {
    return [this, r](gpu::NcclOperation& op, const std::string& what) {
      const CollectiveSite site{
          .who = cohort::detail::concat("replica ", r, " of ", per_gpu_.size(), " (GPU ", comms_[r].device(), ")"),
          .step = step_,
          .timeout_s = timeout_s_};
      try {
        watch_collective(op, what, site, [&] {
          if (const int p = gave_up_.load(std::memory_order_acquire); p >= 0 && std::size_t(p) != r)
            throw DistributedError(cohort::detail::concat(site.who, ", step ", site.step, ": ", what,
                                                          " was abandoned: replica ", p, " gave up (see its error)"));
        });
      } catch (...) {
        abandon(r);
        throw;
      }
    };
  }

 public:
  ReplicaAllReduce(std::span<CudaContext> ctx, std::vector<GradientBucket> buckets, double timeout_s = 300)
      : buckets_(std::move(buckets)), timeout_s_(timeout_s), comms_(devices_of(ctx), timeout_s) {
    for (std::size_t r = 0; r < ctx.size(); ++r)
      per_gpu_.push_back(std::make_unique<gpu::BucketedAllReduce>(comms_[r], buckets_));
  }
  /// The replicas' gradient stores for step `step` (named in errors).
  void begin(std::span<float* const> grads, std::uint64_t step) {
    step_ = step, begun_ = step + 1;
    for (std::size_t r = 0; r < grads.size(); ++r) per_gpu_[r]->begin(grads[r]);
  }
  /// Without a step: the steps are counted from 0.
  void begin(std::span<float* const> grads) { begin(grads, begun_); }
  void start(std::size_t r, CudaContext& ctx, std::size_t b) { per_gpu_[r]->start(ctx.stream, b, watch(r)); }
  void finish(std::size_t r, CudaContext& ctx) { per_gpu_[r]->finish(ctx.stream, watch(r)); }
  /// Replica r failed during the step: the others, waiting for its buckets, abort and throw.
  /// Its own communicator is aborted: its queued all-reduces would otherwise spin on its GPU.
  void abandon(std::size_t r) noexcept {
    int none = -1;
    gave_up_.compare_exchange_strong(none, int(r));
    comms_.mark_failed();
    if (r < comms_.size()) comms_[r].abort(); // on r's thread: the only one using it
  }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }

 private:
  static std::vector<int> devices_of(std::span<CudaContext> ctx) {
    std::vector<int> d;
    for (const CudaContext& c : ctx) d.push_back(c.device);
    return d;
  }
  std::vector<GradientBucket> buckets_;
  double timeout_s_;
  std::uint64_t step_ = 0, begun_ = 0;
  std::atomic<int> gave_up_{-1}; // the first replica that failed (its communicator is gone)
  gpu::NcclCommunicators comms_;
  std::vector<std::unique_ptr<gpu::BucketedAllReduce>> per_gpu_;
};

/// ProcessGroupDDP<Nccl, Cuda>: this rank's buckets all-reduced with every other rank's on its
/// GPU's communication stream as backward produces them; the communicator is built from rank
/// 0's unique id, sent over MPI. Every wait is MpiCommunicator's (its deadline, its liveness
/// channel, its failure announcement), with the NCCL communicator aborted on any failure.
template <>
class device::RankAllReduce<Nccl, Cuda> {
  // Defined before its callers: they need its deduced type.
  /// MpiCommunicator's wait (deadline naming the silent ranks, a peer's announced failure) and
  /// failure (which tells the others), with the NCCL communicator aborted first.
  static auto watch(MpiCommunicator& mpi) {
    return [&mpi](gpu::NcclOperation& op, const std::string& what) {
      watch_collective_with(
          op, what, [&](auto&& done) { mpi.wait_until(what, done); }, [&](const std::string& m) { mpi.fail(m); });
    };
  }

 public:
  RankAllReduce(MpiCommunicator& mpi, CudaContext& ctx, std::vector<GradientBucket> buckets,
                const BucketCompression& compression = {})
      : buckets_(std::move(buckets)), comm_(ctx.device, mpi.timeout()) {
    ncclUniqueId id{};
    if (mpi.rank() == 0)
      if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) // tell the others, waiting for it
        mpi.fail(
            cohort::detail::concat("ncclGetUniqueId failed: ", ncclGetErrorString(r), gpu::detail::where(ctx.device)));
    mpi.broadcast(&id, sizeof id, 0, "the broadcast of the NCCL unique id");
    ncclConfig_t cfg = gpu::detail::non_blocking_config();
    gpu::detail::QuietDeviceGuard on(ctx.device);
    ncclResult_t r = ncclCommInitRankConfig(comm_.out(), mpi.size(), id, mpi.rank(), &cfg);
    gpu::NcclOperation creation(comm_, nullptr, r == ncclInProgress ? ncclSuccess : r);
    watch(mpi)(creation, "the creation of the NCCL communicator");
    gpu_ = std::make_unique<gpu::BucketedAllReduce>(comm_, buckets_, compression);
  }
  RankAllReduce(const RankAllReduce&) = delete;
  RankAllReduce& operator=(const RankAllReduce&) = delete;
  ~RankAllReduce() {
    gpu_.reset();
    // After a failure the peers are gone or aborting: abort rather than finalise with them.
    gpu::NcclComm::close_all(std::span<gpu::NcclComm>(&comm_, 1),
                             std::uncaught_exceptions() == 0 && !cohort::detail::MpiState::get().failed);
  }
  void begin(float* grads) { gpu_->begin(grads); }
  void start(MpiCommunicator& mpi, CudaContext& ctx, std::size_t b) { gpu_->start(ctx.stream, b, watch(mpi)); }
  void finish(MpiCommunicator& mpi, CudaContext& ctx) { gpu_->finish(ctx.stream, watch(mpi)); }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }
  std::vector<float> residual() const { return gpu_->residual(); }
  void set_residual(const std::vector<float>& r) { gpu_->set_residual(r); }

 private:
  std::vector<GradientBucket> buckets_;
  gpu::NcclComm comm_;
  std::unique_ptr<gpu::BucketedAllReduce> gpu_;
};

} // namespace cohort
