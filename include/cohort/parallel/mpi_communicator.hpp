#pragma once
/// \file
/// MPI for ProcessGroupDDP: start-up and shut-down, and the collectives the engine needs, each
/// with a deadline and an error that names the rank, the operation and the step.
///
///     cohort::MpiSession mpi(argc, argv);          // MPI_Init_thread ... MPI_Finalize (optional)
///     cohort::MpiCommunicator comm(/*timeout_s=*/60);
///     comm.allreduce_sum(values, "the loss");       // throws DistributedError, never hangs
///
/// Only the thread that created the communicator calls MPI (MPI_THREAD_FUNNELED); the CPU
/// kernels' threads never do. Errors are returned, not fatal (MPI_ERRORS_RETURN on a private
/// duplicate of MPI_COMM_WORLD), and turned into DistributedError. After one, the process ends
/// with MPI_Abort rather than MPI_Finalize, so a rank that is stuck cannot hold the others.
///
/// Which rank is missing: at the start of every step each rank sends its step number to every
/// other rank (tiny non-blocking messages). When a collective misses its deadline, the ranks
/// whose message for this step has not arrived are named ("no word from rank 1 at step 17").

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cohort/core/error.hpp"

namespace cohort {

namespace detail {
/// Process-wide MPI state: whether cohort initialised MPI, and whether a collective failed.
struct MpiState {
  bool owns = false;   // cohort called MPI_Init_thread: it also ends MPI
  bool failed = false; // a DistributedError was thrown: end with MPI_Abort
  ~MpiState() { finish(); }
  void finish() {
    int init = 0, done = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&done);
    if (!init || done) return;
    if (failed) MPI_Abort(MPI_COMM_WORLD, 1); // peers may be stuck in a collective: take them down
    if (owns) MPI_Finalize();
  }
  static MpiState& get() {
    static MpiState s;
    return s;
  }
};

inline std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, std::size_t(len));
}
} // namespace detail

/// Initialises MPI unless it already is (funnelled threads). Called by MpiCommunicator; call it
/// (or create an MpiSession) first to pass argc/argv. cohort then finalises MPI at exit.
inline void ensure_mpi(int* argc = nullptr, char*** argv = nullptr) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw DistributedError("MPI_Init_thread failed: is this program started by mpirun (or as a plain process)?");
  detail::MpiState::get().owns = true;
  if (provided < MPI_THREAD_FUNNELED)
    throw DistributedError(detail::concat("MPI provides thread level ", provided,
                                          ", cohort needs MPI_THREAD_FUNNELED (", int(MPI_THREAD_FUNNELED), ")"));
}

/// MPI for the lifetime of an object: `cohort::MpiSession mpi(argc, argv);` at the top of main.
/// Ends MPI in its destructor (MPI_Abort instead, when a collective failed).
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv) { ensure_mpi(&argc, &argv); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() { detail::MpiState::get().finish(); }
};

/// A duplicate of MPI_COMM_WORLD with deadlines on every collective.
class MpiCommunicator {
 public:
  explicit MpiCommunicator(double timeout_s) : timeout_s_(timeout_s) {
    if (!(timeout_s > 0)) throw ValueError(detail::concat("ProcessGroupDDP: timeout_s must be > 0, found ", timeout_s));
    ensure_mpi();
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    MPI_Comm node;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, std::size_t(len));
    heard_.assign(std::size_t(size_), 0);
    heartbeat_in_.assign(std::size_t(size_), MPI_REQUEST_NULL);
    heartbeat_out_.assign(std::size_t(size_), MPI_REQUEST_NULL);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  ~MpiCommunicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !detail::MpiState::get().failed) {
      // The last step's heartbeats have arrived or are on their way: let them finish in the
      // background (cancelling a matched send can stall some MPI implementations).
      for (auto* reqs : {&heartbeat_in_, &heartbeat_out_})
        for (auto& r : *reqs) {
          int done = 0;
          if (r != MPI_REQUEST_NULL) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
          if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
        }
      MPI_Comm_free(&comm_);
    }
  }

  /// Another communicator over the same ranks (errors returned, not fatal), for collectives
  /// that must not be ordered with this one's. Free it with release().
  MPI_Comm duplicate() const {
    MPI_Comm c = MPI_COMM_NULL;
    check(MPI_Comm_dup(comm_, &c), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return c;
  }
  /// Frees a communicator from duplicate() (not after a failure: peers may be gone).
  static void release(MPI_Comm& c) noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (c != MPI_COMM_NULL && !finalized && !detail::MpiState::get().failed) MPI_Comm_free(&c);
    c = MPI_COMM_NULL;
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank among the processes of this node (seed 001's local_rank: rank = node * gpus + local).
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }
  const std::string& host() const noexcept { return host_; }
  MPI_Comm handle() const noexcept { return comm_; }
  double timeout() const noexcept { return timeout_s_; }

  /// Marks the start of training step `step`: tells every other rank, and listens for theirs.
  void begin_step(std::uint64_t step) {
    step_ = step;
    if (size_ == 1) return;
    // Last step's messages have all arrived or are arriving (every rank took part in last
    // step's collectives); still, never wait without a deadline.
    for (auto* reqs : {&heartbeat_in_, &heartbeat_out_})
      for (auto& r : *reqs)
        if (r != MPI_REQUEST_NULL) wait(r, "the heartbeat of the previous step");
    beat_ = step;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      check(
          MPI_Irecv(&heard_[std::size_t(p)], 1, MPI_UINT64_T, p, heartbeat_tag, comm_, &heartbeat_in_[std::size_t(p)]),
          "MPI_Irecv (heartbeat)");
      check(MPI_Isend(&beat_, 1, MPI_UINT64_T, p, heartbeat_tag, comm_, &heartbeat_out_[std::size_t(p)]),
            "MPI_Isend (heartbeat)");
    }
  }
  std::uint64_t step() const noexcept { return step_; }

  /// Waits for `req` until the deadline; `what` names the operation in errors ("the all-reduce
  /// of gradient bucket 2"). Calls `progress()` while waiting.
  template <class Progress>
  void wait(MPI_Request& req, const std::string& what, Progress&& progress) {
    wait_until(what, [&] {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
      if (!done) progress();
      return done != 0;
    });
  }
  void wait(MPI_Request& req, const std::string& what) {
    wait(req, what, [] {});
  }
  /// Calls `done()` (which tests requests and starts follow-up operations) until it returns
  /// true; past the deadline, fails naming `what` and the ranks not heard from at this step.
  template <class Done>
  void wait_until(const std::string& what, Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0; !done(); ++spins) {
      if (std::chrono::steady_clock::now() > deadline) fail_timeout(what);
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50)); // yield the core
    }
  }

  void barrier(const std::string& what) {
    MPI_Request r;
    check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier", what);
    wait(r, what);
  }
  void broadcast(void* data, std::size_t bytes, int root, const std::string& what) {
    for (std::size_t done = 0; done < bytes;) { // messages of at most 1 GiB (int counts)
      const int n = int(std::min<std::size_t>(bytes - done, std::size_t(1) << 30));
      MPI_Request r;
      check(MPI_Ibcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, comm_, &r), "MPI_Ibcast", what);
      wait(r, what);
      done += std::size_t(n);
    }
  }
  void allreduce_sum(double* data, std::size_t n, const std::string& what) {
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM, comm_, &r), "MPI_Iallreduce", what);
    wait(r, what);
  }
  /// Every rank's `mine` (same size everywhere), rank-major.
  std::vector<std::uint64_t> allgather(std::uint64_t mine, const std::string& what) {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
    MPI_Request r;
    check(MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &r), "MPI_Iallgather", what);
    wait(r, what);
    return all;
  }
  /// Every rank's text.
  std::vector<std::string> allgather_text(const std::string& mine, const std::string& what) {
    const auto lengths = allgather(mine.size(), what);
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    std::size_t total = 0;
    for (int p = 0; p < size_; ++p) {
      counts[std::size_t(p)] = int(lengths[std::size_t(p)]);
      displs[std::size_t(p)] = int(total);
      total += lengths[std::size_t(p)];
    }
    std::string all(total, '\0');
    MPI_Request r;
    check(MPI_Iallgatherv(mine.data(), int(mine.size()), MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR,
                          comm_, &r),
          "MPI_Iallgatherv", what);
    wait(r, what);
    std::vector<std::string> out;
    for (int p = 0; p < size_; ++p)
      out.push_back(all.substr(std::size_t(displs[std::size_t(p)]), lengths[std::size_t(p)]));
    return out;
  }

  /// Throws DistributedError for a failed MPI call (and ends MPI with MPI_Abort at exit).
  void check(int code, const char* call, const std::string& what = {}) const {
    if (code == MPI_SUCCESS) return;
    fail(detail::concat(call, what.empty() ? "" : " (" + what + ")", " failed: ", detail::mpi_error_text(code)));
  }
  [[noreturn]] void fail(const std::string& message) const {
    detail::MpiState::get().failed = true;
    throw DistributedError(
        detail::concat("rank ", rank_, " of ", size_, " (", host_, "), step ", step_, ": ", message));
  }

 private:
  static constexpr int heartbeat_tag = 7301;

  [[noreturn]] void fail_timeout(const std::string& what) {
    std::string missing;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || heartbeat_in_[std::size_t(p)] == MPI_REQUEST_NULL) continue;
      int arrived = 0;
      MPI_Test(&heartbeat_in_[std::size_t(p)], &arrived, MPI_STATUS_IGNORE);
      if (!arrived) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
    }
    fail(detail::concat(what, " did not complete within ", timeout_s_, " s; ",
                        missing.empty() ? std::string("every rank reached this step (one may have stopped inside it)")
                                        : "no word from rank(s) " + missing + " at this step (stopped, hung or died)"));
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  double timeout_s_;
  std::uint64_t step_ = 0, beat_ = 0;
  std::vector<std::uint64_t> heard_;
  std::vector<MPI_Request> heartbeat_in_, heartbeat_out_;
};

} // namespace cohort
