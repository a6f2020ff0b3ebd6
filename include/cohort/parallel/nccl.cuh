#pragma once
/// \file
/// NCCL for the Cuda backend: the gradient all-reduce of `ThreadedReplicas<N, Cuda>` (one
/// communicator per GPU of the process, created together in one NCCL group) and of
/// `ProcessGroupDDP<Nccl, Cuda>` (one process per GPU: rank 0's NCCL unique id broadcast over
/// MPI, ncclCommInitRankConfig, as Horovod does). CUDA code: compile with nvcc, link cohort::nccl
/// (which brings MPI).
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
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/mpi.hpp"
#include "cohort/parallel/collective_watchdog.hpp"
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

/// Makes `device` current until the end of the scope, for cleanup: never throws.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) (void)cudaSetDevice(device);
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;
  ~QuietDeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

/// A non-blocking communicator's configuration: every call returns at once, the host waits
/// (under a deadline) in ncclCommGetAsyncError.
inline ncclConfig_t non_blocking_config() noexcept {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}
} // namespace gpu::detail

namespace gpu {
/// One NCCL communicator on one device: non-blocking, aborted at most once, and ended by its
/// destructor without throwing or waiting past its deadline.
///
///     gpu::NcclComm comm(device, timeout_s);
///     ncclCommInitRankConfig(comm.out(), size, id, rank, &cfg);   // then watch NcclOperation(comm)
class NcclComm {
 public:
  NcclComm(int device, double timeout_s) noexcept : device_(device), timeout_s_(timeout_s) {}
  NcclComm(NcclComm&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)), device_(o.device_), timeout_s_(o.timeout_s_), aborted_(o.aborted_) {}
  NcclComm& operator=(NcclComm&&) = delete;
  ~NcclComm() { close_all(std::span<NcclComm>(this, 1), std::uncaught_exceptions() == 0); }

  /// Where ncclCommInitRankConfig writes the communicator.
  ncclComm_t* out() noexcept { return &comm_; }
  ncclComm_t get() const noexcept { return comm_; }
  int device() const noexcept { return device_; }
  bool aborted() const noexcept { return aborted_; }

  /// ncclSuccess, ncclInProgress (creation or an enqueue still under way), or the error.
  ncclResult_t state() const noexcept {
    if (!comm_) return ncclInvalidUsage;
    ncclResult_t s = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &s);
    return r != ncclSuccess ? r : s;
  }
  /// An error's text with NCCL's own account of it (ncclGetLastError).
  std::string describe(ncclResult_t r) const {
    std::string text = ncclGetErrorString(r);
    if (const char* last = comm_ ? ncclGetLastError(comm_) : nullptr; last && *last)
      text += cohort::detail::concat(" (", last, ")");
    return text;
  }

  /// ncclCommAbort: stops its kernels (one waiting for a dead peer spins forever otherwise) and
  /// frees it. Once; never throws.
  void abort() noexcept {
    if (!comm_) return;
    aborted_ = true;
    detail::QuietDeviceGuard on(device_);
    (void)ncclCommAbort(std::exchange(comm_, nullptr));
  }

  /// Ends `comms` without hanging: ncclCommFinalize on each (so peers see an orderly end), their
  /// quiescence awaited together until the deadline, then ncclCommDestroy; one that failed or did
  /// not quiesce in time (a peer died or stopped) is aborted. `graceful` false (after a failure,
  /// or while an exception unwinds): abort at once, the peers may be gone.
  static void close_all(std::span<NcclComm> comms, bool graceful) noexcept {
    double timeout_s = 0;
    for (NcclComm& c : comms) {
      if (!c.comm_) continue;
      timeout_s = std::max(timeout_s, c.timeout_s_);
      if (!graceful || c.state() != ncclSuccess) {
        c.abort();
        continue;
      }
      detail::QuietDeviceGuard on(c.device_);
      if (const ncclResult_t r = ncclCommFinalize(c.comm_); r != ncclSuccess && r != ncclInProgress) c.abort();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (bool pending = true; pending;) {
      pending = false;
      for (NcclComm& c : comms) {
        if (!c.comm_) continue;
        if (const ncclResult_t s = c.state(); s == ncclInProgress && std::chrono::steady_clock::now() <= deadline) {
          pending = true;
        } else if (s == ncclSuccess) {
          detail::QuietDeviceGuard on(c.device_);
          (void)ncclCommDestroy(std::exchange(c.comm_, nullptr)); // quiescent: returns at once
        } else {
          c.abort(); // failed, or still not quiescent at the deadline
        }
      }
      if (pending) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  ncclComm_t comm_ = nullptr;
  int device_;
  double timeout_s_;
  bool aborted_ = false;
};

/// What the watchdog polls (WatchedCollective): an event recorded after a collective on the
/// communication stream (its completion), or with no event the communicator's own pending work
/// (its creation, or an enqueue that returned ncclInProgress). `failed` is an NCCL call's error
/// already known: the watchdog reports it at once.
class NcclOperation {
 public:
  explicit NcclOperation(NcclComm& comm, cudaEvent_t event = nullptr, ncclResult_t failed = ncclSuccess) noexcept
      : comm_(comm), event_(event), failed_(failed) {}
  bool done() {
    if (!event_) return comm_.state() != ncclInProgress;
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) cuda_error_ = e; // reported by error()
    return false;
  }
  std::string error() {
    if (failed_ != ncclSuccess) return comm_.describe(failed_);
    if (comm_.aborted()) return "the communicator was aborted after an earlier failure";
    if (cuda_error_ != cudaSuccess)
      return cohort::detail::concat("cudaEventQuery: ", cudaGetErrorName(cuda_error_), " (",
                                    cudaGetErrorString(cuda_error_), ")");
    if (const ncclResult_t s = comm_.state(); s != ncclSuccess && s != ncclInProgress) return comm_.describe(s);
    return {};
  }
  void abort() noexcept { comm_.abort(); }
  std::string_view name() const noexcept { return "the NCCL communicator"; }

 private:
  NcclComm& comm_;
  cudaEvent_t event_;
  ncclResult_t failed_;
  cudaError_t cuda_error_ = cudaSuccess;
};

/// The creation of several communicators in one group (ThreadedReplicas): done when none is in
/// progress; one failure aborts them all.
class NcclGroupCreation {
 public:
  explicit NcclGroupCreation(std::span<NcclComm> comms) noexcept : comms_(comms) {}
  bool done() {
    return std::none_of(comms_.begin(), comms_.end(), [](const NcclComm& c) { return c.state() == ncclInProgress; });
  }
  std::string error() {
    for (const NcclComm& c : comms_)
      if (const ncclResult_t s = c.state(); s != ncclSuccess && s != ncclInProgress)
        return cohort::detail::concat("GPU ", c.device(), ": ", c.describe(s));
    return {};
  }
  void abort() noexcept {
    for (NcclComm& c : comms_) c.abort();
  }
  std::string_view name() const noexcept { return "every replica's NCCL communicator"; }

 private:
  std::span<NcclComm> comms_;
};

/// One NCCL communicator per device of this process, created together (one NCCL group of
/// non-blocking ncclCommInitRankConfig, as ncclCommInitAll does, but waited for under the
/// deadline), ended by its destructor without hanging.
class NcclCommunicators {
 public:
  NcclCommunicators(std::vector<int> devices, double timeout_s = 300) {
    comms_.reserve(devices.size());
    for (int d : devices) comms_.emplace_back(d, timeout_s);
    const int n = int(comms_.size());
    ncclUniqueId id{};
    COHORT_CUDA_CHECK(ncclGetUniqueId(&id), devices.front());
    ncclConfig_t cfg = detail::non_blocking_config();
    COHORT_CUDA_CHECK(ncclGroupStart(), devices.front());
    ncclResult_t first = ncclSuccess;
    int failed_device = devices.front();
    for (int r = 0; r < n; ++r) {
      detail::QuietDeviceGuard on(devices[std::size_t(r)]); // each communicator is created on its device
      const ncclResult_t e = ncclCommInitRankConfig(comms_[std::size_t(r)].out(), n, id, r, &cfg);
      if (e != ncclSuccess && e != ncclInProgress && first == ncclSuccess)
        first = e, failed_device = devices[std::size_t(r)];
    }
    const ncclResult_t end = ncclGroupEnd(); // ncclInProgress: the creation goes on in the background
    if (first == ncclSuccess && end != ncclSuccess && end != ncclInProgress) first = end;
    const std::string what = cohort::detail::concat("the creation of the NCCL communicators of ", n, " GPUs");
    NcclGroupCreation creation(comms_);
    if (first != ncclSuccess) {
      creation.abort();
      throw DistributedError(cohort::detail::concat(
          "replicas on GPUs ", devices.front(), "..", devices.back(), ": ", what, " failed on GPU ", failed_device,
          ": ", ncclGetErrorString(first), "; every replica's NCCL communicator was aborted"));
    }
    watch_collective(creation, what,
                     {.who = cohort::detail::concat("replicas on GPUs ", devices.front(), "..", devices.back()),
                      .step = 0,
                      .timeout_s = timeout_s});
  }
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;
  /// Together: finalising one alone could wait for its peers' finalisation.
  ~NcclCommunicators() { NcclComm::close_all(comms_, std::uncaught_exceptions() == 0 && !failed_.load()); }

  NcclComm& operator[](std::size_t r) noexcept { return comms_[r]; }
  std::size_t size() const noexcept { return comms_.size(); }
  /// A replica gave up: end the others by aborting them.
  void mark_failed() noexcept { failed_.store(true, std::memory_order_release); }

 private:
  std::vector<NcclComm> comms_;
  std::atomic<bool> failed_{false}; // set from the replicas' threads
};
} // namespace gpu

namespace gpu {
/// One GPU's side of a bucketed gradient all-reduce: each bucket's ncclAllReduce runs on a
/// communication stream of its own once the compute stream has produced the bucket (an event),
/// so it overlaps the backward kernels of earlier layers. start() does not block the host;
/// finish() waits until every bucket is summed, through `watch(NcclOperation&, what)` (a
/// watchdog: deadline, asynchronous errors, abort), then makes the compute stream wait too.
class BucketedAllReduce {
 public:
  BucketedAllReduce(NcclComm& comm, std::span<const GradientBucket> buckets)
      : comm_(comm), device_(comm.device()), buckets_(buckets.begin(), buckets.end()), stream_(device_),
        done_(device_) {
    ready_.reserve(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) ready_.emplace_back(device_);
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
    const ncclResult_t r =
        ncclAllReduce(grads_ + k.begin, grads_ + k.begin, k.size(), ncclFloat, ncclSum, comm_.get(), stream_.get());
    if (r != ncclSuccess) { // ncclInProgress: still being enqueued (non-blocking), wait; else fail at once
      NcclOperation op(comm_, nullptr, r == ncclInProgress ? ncclSuccess : r);
      watch(op, what());
    }
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
  NcclComm& comm_;
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
  RankAllReduce(MpiCommunicator& mpi, CudaContext& ctx, std::vector<GradientBucket> buckets)
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
    gpu_ = std::make_unique<gpu::BucketedAllReduce>(comm_, buckets_);
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

 private:
  std::vector<GradientBucket> buckets_;
  gpu::NcclComm comm_;
  std::unique_ptr<gpu::BucketedAllReduce> gpu_;
};

} // namespace cohort
