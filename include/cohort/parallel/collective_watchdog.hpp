#pragma once
/// \file
/// Waiting for a collective that runs off the host thread (an NCCL all-reduce on a GPU stream,
/// an NCCL communicator being created) with the deadline semantics of MpiCommunicator: it
/// completes, or it fails with a DistributedError naming the rank, the operation and the step,
/// after its communicator has been aborted (once), so that nothing is left waiting for it.
/// Example (not compiled: the Op it shows is a concept's outline):
///
///     struct Op {                                   // what is watched (e.g. gpu::NcclOperation)
///       bool done();                                //   completed?
///       std::string error();                        //   the communicator's asynchronous error, "" if none
///       void abort() noexcept;                      //   stop it (ncclCommAbort)
///       std::string_view name() const;              //   "the NCCL communicator"
///     };
///     cohort::watch_collective(op, "the all-reduce of 4 gradient buckets",
///                              {.who = "replica 1 of 4 (GPU 1)", .step = 3, .timeout_s = 60},
///                              [] { /* beat, throw if a peer gave up */ });
///
/// An asynchronous error fails at once ("... failed: <error>; the NCCL communicator was
/// aborted"); no completion by the deadline fails then ("... did not complete within 60 s: ...");
/// an exception from the poll callback (a peer announced that it gave up) aborts too and goes
/// on with the same note. watch_collective_with() takes the waiting loop and the failure from
/// elsewhere: MpiCommunicator::wait_until (whose deadline names the silent ranks) and
/// MpiCommunicator::fail (which tells the other ranks). Pure host C++: tested with fakes.

#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "cohort/core/error.hpp"

namespace cohort {

/// A collective in flight that a watchdog can poll and abort.
template <class Op>
concept WatchedCollective = requires(Op& op, const Op& c) {
  { op.done() } -> std::convertible_to<bool>;
  { op.error() } -> std::convertible_to<std::string>;
  { op.abort() }
  noexcept;
  { c.name() } -> std::convertible_to<std::string_view>;
};

/// Who waits, at which step, for how long: named in every error.
struct CollectiveSite {
  std::string who;        // "rank 0 of 3 (host)", "replica 1 of 4 (GPU 1)"
  std::uint64_t step = 0; // the training step (optimiser steps taken before it)
  double timeout_s = 300; // options.parallel.timeout_s
};

namespace detail {
/// Aborts `op` the first time it is called; the note errors carry after that.
template <class Op>
class AbortOnce {
 public:
  explicit AbortOnce(Op& op) noexcept : op_(op) {}
  void operator()() noexcept {
    if (done_) return;
    done_ = true;
    op_.abort();
  }
  bool done() const noexcept { return done_; }
  std::string note() const { return concat("; ", op_.name(), " was aborted"); }

 private:
  Op& op_;
  bool done_ = false;
};
} // namespace detail

/// Waits for `op` through `wait_until(done)`, a loop that calls done() until it returns true and
/// throws at its own deadline (MpiCommunicator::wait_until: it also beats, and fails at once when
/// another rank gave up). An asynchronous error aborts `op` and calls `fail(message)`, which must
/// throw (MpiCommunicator::fail names the rank and step and tells the other ranks). Any exception
/// out of the loop aborts `op` first; a DistributedError then says so.
template <WatchedCollective Op, class WaitUntil, class Fail>
void watch_collective_with(Op& op, const std::string& what, WaitUntil&& wait_until, Fail&& fail) {
  detail::AbortOnce<Op> abort(op);
  try {
    wait_until([&]() -> bool {
      // The error first: an operation that completed on a failed communicator summed nothing.
      if (std::string e = op.error(); !e.empty()) {
        abort();
        const std::string message = detail::concat(what, " failed: ", e, abort.note());
        fail(message);
        throw DistributedError(message); // `fail` must not return
      }
      return bool(op.done());
    });
  } catch (const DistributedError& e) {
    if (abort.done()) throw; // its message already says so
    abort();
    throw DistributedError(detail::concat(e.what(), abort.note()));
  } catch (...) {
    abort();
    throw;
  }
}

/// Waits for `op` until `site.timeout_s` has passed, calling `poll()` between its checks (a
/// liveness beat; it throws when a peer gave up). Errors read "<who>, step <s>: <what> ...".
template <WatchedCollective Op, class Poll>
void watch_collective(Op& op, const std::string& what, const CollectiveSite& site, Poll&& poll) {
  auto fail = [&](const std::string& message) {
    throw DistributedError(detail::concat(site.who, ", step ", site.step, ": ", message));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(site.timeout_s);
  watch_collective_with(
      op, what,
      [&](auto&& done) {
        for (int spins = 0; !done(); ++spins) {
          poll();
          if (std::chrono::steady_clock::now() > deadline)
            fail(detail::concat(what, " did not complete within ", site.timeout_s,
                                " s: a peer stopped, hung or died, or is waiting in another operation"));
          // A GPU collective takes microseconds to milliseconds: spin briefly, then yield the core.
          if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      },
      fail);
}

template <WatchedCollective Op>
void watch_collective(Op& op, const std::string& what, const CollectiveSite& site) {
  watch_collective(op, what, site, [] {});
}

} // namespace cohort
