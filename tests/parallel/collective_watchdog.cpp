// The collective watchdog (NCCL's deadline and abort, parallel/nccl.cuh) with fake operations:
// a deadline names rank, operation, step and seconds; an asynchronous error fails at once; every
// failure aborts the communicator exactly once; a poll callback's exception (a peer gave up)
// propagates after the abort.

#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

#include <cohort/parallel/collective_watchdog.hpp>

using namespace cohort;

namespace {
/// Completes after `polls_to_finish` polls (never when negative); fails with `error_after` polls.
/// "Never" ends after 3 s all the same: a watchdog that lost its deadline fails the test, not
/// hangs it.
struct FakeOp {
  int polls_to_finish = -1;
  int error_after = -1;
  std::string error_text = "unhandled system error: remote process exited";
  int polls = 0, error_polls = 0, aborts = 0;
  std::chrono::steady_clock::time_point born = std::chrono::steady_clock::now();

  bool done() {
    if (std::chrono::steady_clock::now() - born > std::chrono::seconds(3)) return true;
    return polls_to_finish >= 0 && ++polls > polls_to_finish;
  }
  std::string error() {
    ++error_polls;
    return error_after >= 0 && error_polls > error_after ? error_text : std::string();
  }
  void abort() noexcept { ++aborts; }
  std::string_view name() const { return "the NCCL communicator"; }
};
static_assert(WatchedCollective<FakeOp>);

const CollectiveSite site{.who = "rank 1 of 3 (node7)", .step = 42, .timeout_s = 0.2};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
} // namespace

TEST_CASE("collective watchdog: an operation that never completes fails at the deadline, aborted once") {
  FakeOp op;
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    watch_collective(op, "the all-reduce of 3 gradient buckets", site);
  } catch (const DistributedError& e) {
    message = e.what();
  }
  const double waited = seconds_since(t0);
  INFO(message);
  CHECK(contains(message, "rank 1 of 3 (node7), step 42: the all-reduce of 3 gradient buckets did not complete "
                          "within 0.2 s"));
  CHECK(contains(message, "the NCCL communicator was aborted"));
  CHECK(op.aborts == 1);
  CHECK(waited >= 0.2);
  CHECK(waited < 5.0); // loosely: a shared machine
}

TEST_CASE("collective watchdog: an asynchronous error fails at once with its text, aborted once") {
  FakeOp op;
  op.error_after = 2;
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    watch_collective(op, "the creation of the NCCL communicator", site);
  } catch (const DistributedError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message == "rank 1 of 3 (node7), step 42: the creation of the NCCL communicator failed: unhandled system "
                   "error: remote process exited; the NCCL communicator was aborted");
  CHECK(op.aborts == 1);
  CHECK(op.error_polls == 3);
  CHECK(seconds_since(t0) < 0.2); // before the deadline
}

TEST_CASE("collective watchdog: a completing operation returns without an abort") {
  FakeOp op;
  op.polls_to_finish = 5;
  int beats = 0;
  CHECK_NOTHROW(watch_collective(op, "the all-reduce of 1 gradient bucket", site, [&] { ++beats; }));
  CHECK(op.aborts == 0);
  CHECK(beats == 5); // polled while not done
  FakeOp at_once;
  at_once.polls_to_finish = 0;
  CHECK_NOTHROW(watch_collective(at_once, "the all-reduce of 1 gradient bucket", site));
  CHECK(at_once.aborts == 0);
}

TEST_CASE("collective watchdog: the poll callback runs while waiting and its exception propagates after the abort") {
  FakeOp op; // never completes: only the peer's announcement ends the wait
  int beats = 0;
  std::string message;
  try {
    watch_collective(op, "the all-reduce of 3 gradient buckets", site, [&] {
      if (++beats == 10)
        throw DistributedError("rank 1 of 3 (node7), step 42: the all-reduce of 3 gradient buckets was abandoned: "
                               "rank 2 gave up at step 42 (see its message)");
    });
  } catch (const DistributedError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(beats == 10);
  CHECK(op.aborts == 1);
  CHECK(message == "rank 1 of 3 (node7), step 42: the all-reduce of 3 gradient buckets was abandoned: rank 2 gave up "
                   "at step 42 (see its message); the NCCL communicator was aborted");

  FakeOp other; // an exception of another type passes unchanged, after the abort
  CHECK_THROWS_AS(watch_collective(other, "x", site, [] { throw std::runtime_error("not distributed"); }),
                  std::runtime_error);
  CHECK(other.aborts == 1);
}

TEST_CASE("collective watchdog: with another waiting loop and failure (MpiCommunicator's), errors still abort once") {
  // MpiCommunicator::wait_until's shape: done() until true, its own deadline error; fail() announces.
  int announced = 0;
  auto fail = [&](const std::string& m) {
    ++announced;
    throw DistributedError("rank 0 of 2 (host), step 7: " + m);
  };
  FakeOp late;
  std::string message;
  try {
    watch_collective_with(
        late, "the all-reduce of 2 gradient buckets",
        [&](auto&& done) {
          for (int i = 0; !done(); ++i)
            if (i == 20)
              fail("the all-reduce of 2 gradient buckets did not complete within 3 s; rank 1 silent for 3.02 s "
                   "(last heard at step 7): stopped, hung or died");
        },
        fail);
  } catch (const DistributedError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(late.aborts == 1);
  CHECK(announced == 1);
  CHECK(contains(message, "rank 1 silent for 3.02 s"));
  CHECK(contains(message, "; the NCCL communicator was aborted"));

  FakeOp broken;
  broken.error_after = 0;
  message.clear();
  try {
    watch_collective_with(
        broken, "the all-reduce of 2 gradient buckets",
        [&](auto&& done) {
          while (!done()) {
          }
        },
        fail);
  } catch (const DistributedError& e) {
    message = e.what();
  }
  CHECK(broken.aborts == 1);
  CHECK(announced == 2);
  CHECK(message == "rank 0 of 2 (host), step 7: the all-reduce of 2 gradient buckets failed: unhandled system error: "
                   "remote process exited; the NCCL communicator was aborted");
}
