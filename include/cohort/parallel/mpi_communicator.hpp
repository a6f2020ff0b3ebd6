#pragma once
/// \file
/// MPI for ProcessGroupDDP: start-up and shut-down, and the collectives the engine needs, each
/// with a deadline and an error that names the rank, the operation and the step.
/// Example (not compiled: needs MPI (tests/mpi/ builds it)):
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
/// Which rank is missing: every rank beats on a liveness channel of its own while it is inside
/// cohort's communication (parallel/mpi_liveness.hpp). When a collective misses its deadline,
/// the ranks not heard from lately are named ("rank 1 silent for 3.02 s (last heard at step 3)"),
/// also when they stopped inside that very collective; the rank that gives up tells the others,
/// which fail at once with their own view. Every collective is started, then waited for, and
/// reports its start through started() (the hook tests use to stop a rank inside it).

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/parallel/gradient_compression.hpp"
#include "cohort/parallel/mpi_liveness.hpp"

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
    if (failed) {
      // The other ranks were told this one gave up: let them say what they saw before MPI_Abort
      // takes them down (peers stuck in a collective would otherwise hold the job).
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (owns) MPI_Finalize();
  }
  static MpiState& get() {
    static MpiState s;
    return s;
  }
};

/// Test seam: called on this rank right after it has started each collective (its part is
/// posted), with the name its wait uses and the step. Fault tests stop or kill a rank there,
/// inside a collective; empty otherwise.
inline std::function<void(std::string_view what, std::uint64_t step)>& collective_started_hook() {
  static std::function<void(std::string_view, std::uint64_t)> hook;
  return hook;
}

inline std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, std::size_t(len));
}
/// The MPI reduction summing 16-bit gradients of format `c` (MPI has no bf16/fp16 sum): each
/// partial sum is widened, added in float and rounded back. Created on first use (after
/// MPI_Init) and kept until exit; commutative, so MPI may combine in any order, and the
/// reduce-scatter gives each element's sum to one rank, so all ranks still receive the same bits.
template <GradientCompression C>
void add_packed_op(void* in, void* inout, int* len, MPI_Datatype*) {
  add_packed(C, static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout), std::size_t(*len));
}
inline MPI_Op compressed_sum_op(GradientCompression c) {
  static MPI_Op bf16 = MPI_OP_NULL, fp16 = MPI_OP_NULL;
  MPI_Op& op = c == GradientCompression::fp16 ? fp16 : bf16;
  if (op == MPI_OP_NULL) {
    const int rc = c == GradientCompression::fp16 ? MPI_Op_create(&add_packed_op<GradientCompression::fp16>, 1, &op)
                                                  : MPI_Op_create(&add_packed_op<GradientCompression::bf16>, 1, &op);
    if (rc != MPI_SUCCESS)
      throw DistributedError(concat("MPI_Op_create failed for the ", compression_name(c), " gradient sum"));
  }
  return op;
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
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_.assign(name, std::size_t(len));
    // Non-blocking duplicates under the deadline: a rank that never arrives is an error, not a hang.
    comm_ = duplicate_of(MPI_COMM_WORLD, "the creation of the communicator (start-up)");
    MPI_Comm beats = duplicate_of(comm_, "the creation of the liveness channel (start-up)");
    live_ = std::make_unique<detail::MpiLiveness>(beats, rank_, size_, beat_interval());
    beat_comm_ = beats;
    MPI_Comm node;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  ~MpiCommunicator() {
    live_.reset(); // its requests first: they belong to beat_comm_
    release(beat_comm_);
    release(comm_);
  }

  /// Another communicator over the same ranks (errors returned, not fatal), for collectives
  /// that must not be ordered with this one's. Free it with release().
  MPI_Comm duplicate() { return duplicate_of(comm_, "the creation of a communicator"); }
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

  /// Marks the start of training step `step` (named in errors). Every rank hears of it at once:
  /// a rank that falls silent is then reported with the step it stopped in.
  void begin_step(std::uint64_t step) {
    step_ = step;
    if (live_) live_->poll_now(beat());
    keep_alive(detail::concat("the start of step ", step));
  }
  std::uint64_t step() const noexcept { return step_; }

  /// Call right after this rank has started a collective (its part posted), with the name its
  /// wait will use: counts it, beats if due, and fails at once if another rank has given up.
  void started(const std::string& what) {
    ++op_;
    if (auto& hook = detail::collective_started_hook()) hook(what, step_);
    keep_alive(what);
  }

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
  /// true; past the deadline, fails naming `what` and the ranks that fell silent.
  template <class Done>
  void wait_until(const std::string& what, Done&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0; !done(); ++spins) {
      keep_alive(what);
      if (std::chrono::steady_clock::now() > deadline) fail_timeout(what);
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50)); // yield the core
    }
  }

  void barrier(const std::string& what) {
    MPI_Request r;
    check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier", what);
    started(what);
    wait(r, what);
  }
  void broadcast(void* data, std::size_t bytes, int root, const std::string& what) {
    for (std::size_t done = 0; done < bytes;) { // messages of at most 1 GiB (int counts)
      const int n = int(std::min<std::size_t>(bytes - done, std::size_t(1) << 30));
      MPI_Request r;
      check(MPI_Ibcast(static_cast<char*>(data) + done, n, MPI_BYTE, root, comm_, &r), "MPI_Ibcast", what);
      started(what);
      wait(r, what);
      done += std::size_t(n);
    }
  }
  void allreduce_sum(double* data, std::size_t n, const std::string& what) {
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_DOUBLE, MPI_SUM, comm_, &r), "MPI_Iallreduce", what);
    started(what);
    wait(r, what);
  }
  /// Every rank's `mine` (same size everywhere), rank-major.
  std::vector<std::uint64_t> allgather(std::uint64_t mine, const std::string& what) {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
    MPI_Request r;
    check(MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &r), "MPI_Iallgather", what);
    started(what);
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
    started(what);
    wait(r, what);
    std::vector<std::string> out;
    for (int p = 0; p < size_; ++p)
      out.push_back(all.substr(std::size_t(displs[std::size_t(p)]), lengths[std::size_t(p)]));
    return out;
  }

  /// Throws DistributedError for a failed MPI call (and ends MPI with MPI_Abort at exit).
  void check(int code, const char* call, const std::string& what = {}) {
    if (code == MPI_SUCCESS) return;
    std::string message =
        detail::concat(call, what.empty() ? "" : " (" + what + ")", " failed: ", detail::mpi_error_text(code));
    if (live_ && !live_->silent(silent_after()).empty()) message += "; " + silent_ranks(silent_after());
    fail(message);
  }
  /// Throws DistributedError naming this rank and the step, after telling the other ranks that
  /// this one gives up (they then fail at once, each naming what it saw).
  [[noreturn]] void fail(const std::string& message) {
    detail::MpiState::get().failed = true;
    if (live_) live_->announce_failure(beat(), 0.5);
    throw DistributedError(
        detail::concat("rank ", rank_, " of ", size_, " (", host_, "), step ", step_, ": ", message));
  }

 private:
  detail::MpiLiveness::Beat beat() const noexcept { return {.step = step_, .op = op_}; }

  /// Live ranks inside cohort's communication beat this often: often enough that one is never
  /// taken for a silent one, rarely enough to cost nothing.
  double beat_interval() const noexcept { return std::clamp(timeout_s_ / 10, 1e-3, 1.0); }
  /// At a missed deadline a rank is silent when not heard from for this long: one that stopped in
  /// the collective has been silent for about the whole deadline by then.
  double silent_after() const noexcept { return std::max(3 * beat_interval(), timeout_s_ / 2); }

  /// Beats, takes in the others' beats, and fails if one of them gave up.
  void keep_alive(const std::string& what) {
    if (!live_) return;
    live_->poll(beat());
    if (const int p = live_->failed_peer(); p >= 0) {
      const auto& b = live_->peer(p).beat;
      std::string message =
          detail::concat(what, " was abandoned: rank ", p, " gave up at step ", b.step, " (see its message)");
      // Before this rank's own deadline: a rank that missed three beats is silent.
      if (!live_->silent(3 * beat_interval()).empty()) message += "; " + silent_ranks(3 * beat_interval());
      fail(message);
    }
  }

  /// "rank 1 silent for 3.02 s (last heard at step 3): stopped, hung or died", for every silent rank.
  std::string silent_ranks(double after) const {
    std::string out;
    for (const int p : live_->silent(after)) {
      const auto& q = live_->peer(p);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.2f", live_->seconds_since_heard(p));
      out += out.empty() ? "" : "; ";
      if (q.error != MPI_SUCCESS)
        out += detail::concat("rank ", p, " unreachable (", detail::mpi_error_text(q.error), ")");
      else if (!q.heard)
        out += detail::concat("rank ", p, " silent for ", seconds, " s (never heard since start-up)");
      else
        out += detail::concat("rank ", p, " silent for ", seconds, " s (last heard at step ", q.beat.step, ")");
    }
    return out + ": stopped, hung or died";
  }

  [[noreturn]] void fail_timeout(const std::string& what) {
    std::string message = detail::concat(what, " did not complete within ", timeout_s_, " s; ");
    if (!live_->silent(silent_after()).empty()) {
      message += silent_ranks(silent_after());
    } else { // everybody is alive: they must be waiting in different operations
      message += "every rank is alive (";
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        const auto& q = live_->peer(p);
        message += detail::concat(p == (rank_ == 0 ? 1 : 0) ? "" : "; ", "rank ", p, " at step ", q.beat.step, " with ",
                                  q.beat.op, " collectives started");
      }
      message += detail::concat("; this rank ", op_, "): the ranks are not in the same operation");
    }
    fail(message);
  }

  /// A duplicate of `parent` with errors returned, waited for under the deadline.
  MPI_Comm duplicate_of(MPI_Comm parent, const std::string& what) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Request r;
    check(MPI_Comm_idup(parent, &c, &r), "MPI_Comm_idup", what);
    if (live_) started(what);
    if (live_) {
      wait(r, what);
    } else { // no liveness channel yet: a plain deadline
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
      for (int done = 0; !done;) {
        check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
        if (!done && std::chrono::steady_clock::now() > deadline)
          fail(detail::concat(what, " did not complete within ", timeout_s_,
                              " s: a rank did not start, or stopped or died before reaching it"));
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    check(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", what);
    return c;
  }

  MPI_Comm comm_ = MPI_COMM_NULL, beat_comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  double timeout_s_;
  std::uint64_t step_ = 0, op_ = 0;
  std::unique_ptr<detail::MpiLiveness> live_;
};

} // namespace cohort
