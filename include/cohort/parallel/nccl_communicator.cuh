#pragma once
/// \file
/// NCCL communicators for the Cuda backend (parallel/nccl.cuh): the Nccl tag, a non-blocking
/// communicator per device that is aborted at most once and ends under a deadline, the event a
/// watchdog polls, and the group creation of one communicator per GPU of this process.

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
#include "cohort/mpi.hpp"
#include "cohort/parallel/collective_watchdog.hpp"

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

} // namespace cohort
