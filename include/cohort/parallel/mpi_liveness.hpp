#pragma once
/// \file
/// Which ranks are still there, independently of the collective a rank is waiting in: the
/// liveness channel under MpiCommunicator (parallel/mpi_communicator.hpp).
/// Example (not compiled: needs MPI (tests/mpi/ builds it)):
///
///     detail::MpiLiveness live(heartbeat_comm, rank, size, /*interval_s=*/0.3);
///     live.poll({.step = 3, .op = 41});          // while waiting: beat if due, take in arrivals
///     live.silent(1.5);                           // the ranks not heard from for 1.5 s
///
/// While a rank is inside cohort's communication (starting a step, starting a collective,
/// waiting for one) it sends every other rank, at most every `interval_s`, a beat: its step and
/// how many collectives it has started; and it takes in theirs. A rank that stops (SIGSTOP, a
/// debugger, a hung kernel) or dies stops beating even when it stopped *inside* a collective, so
/// when a collective misses its deadline the survivors name it from what they heard, not from
/// which collective it reached. The same channel carries a rank's failure: a survivor that gives
/// up tells the others, which then fail at once with their own view instead of waiting out
/// their deadline or being killed by MPI_Abort before they could say what they saw.
///
/// Beats are four 64-bit integers on a communicator of their own (tiny, eager messages); one
/// send per peer is in flight at a time (a peer that does not drain its beats is not sent more).

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace cohort::detail {

class MpiLiveness {
 public:
  using clock = std::chrono::steady_clock;

  /// What a beat says about its sender.
  struct Beat {
    std::uint64_t step = 0;    // the training step it is at
    std::uint64_t op = 0;      // collectives it has started so far (the same sequence on every rank)
    std::uint64_t failed = 0;  // 1: it gave up (a deadline or an MPI error) and is about to end
    std::uint64_t sent_us = 0; // the sender's steady clock when it sent the beat (set by poll)
  };

  /// What this rank knows of a peer.
  struct Peer {
    clock::time_point last_heard; // when its latest beat was sent, on this rank's clock (creation: none yet)
    Beat beat{};                  // its latest beat
    bool heard = false;           // any beat at all
    int error = MPI_SUCCESS;      // an MPI error on the channel to it (the peer is unreachable)
    /// min over its beats of (arrival here - sent there): the two clocks' offset plus the
    /// shortest delivery seen. A beat taken in late (this rank was busy) still dates from when
    /// it was sent, so an old queued beat never makes a stopped rank look alive.
    std::int64_t offset_us = std::numeric_limits<std::int64_t>::max();
  };

  MpiLiveness(MPI_Comm comm, int rank, int size, double interval_s)
      : comm_(comm), rank_(rank), size_(size),
        interval_(std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(interval_s))),
        peers_(std::size_t(size)), in_(std::size_t(size)), out_(std::size_t(size)), last_words_(std::size_t(size)),
        recv_(std::size_t(size), MPI_REQUEST_NULL), send_(std::size_t(size), MPI_REQUEST_NULL),
        farewell_(std::size_t(size), MPI_REQUEST_NULL) {
    const auto now = clock::now();
    for (auto& p : peers_) p.last_heard = now;
    for (int p = 0; p < size_; ++p)
      if (p != rank_) listen(p);
  }
  MpiLiveness(const MpiLiveness&) = delete;
  MpiLiveness& operator=(const MpiLiveness&) = delete;
  ~MpiLiveness() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& r : recv_)
      if (r != MPI_REQUEST_NULL) { // a receive that never matched: cancel it (receives cancel cleanly)
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
    // Sends are tiny and eager: already delivered or buffered; let them finish in the background
    // (cancelling a matched send can stall some MPI implementations).
    for (auto* reqs : {&send_, &farewell_})
      for (auto& r : *reqs)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }

  /// Takes in the beats that arrived and, if one is due, sends `mine` to every peer. Cheap to
  /// call often: it does nothing more than read the clock until `interval / 16` has passed.
  void poll(const Beat& mine) {
    if (size_ == 1) return;
    const auto now = clock::now();
    if (now < next_poll_) return;
    next_poll_ = now + interval_ / 16;
    receive(now);
    if (now >= next_beat_) {
      next_beat_ = now + interval_;
      for (int p = 0; p < size_; ++p) {
        if (p == rank_ || peers_[std::size_t(p)].error != MPI_SUCCESS) continue;
        MPI_Request& r = send_[std::size_t(p)];
        if (r != MPI_REQUEST_NULL && !test(r, p)) continue; // the last beat is still on its way
        out_[std::size_t(p)] = mine;
        out_[std::size_t(p)].sent_us = micros(now);
        record(p, MPI_Isend(&out_[std::size_t(p)], fields, MPI_UINT64_T, p, tag, comm_, &r));
      }
    }
  }
  /// poll() now, whatever the time.
  void poll_now(const Beat& mine) {
    next_poll_ = next_beat_ = clock::time_point{};
    poll(mine);
  }

  /// Tells every peer that this rank gives up (best effort, waits at most `grace_s` for the
  /// messages to leave).
  void announce_failure(const Beat& mine, double grace_s) {
    if (size_ == 1 || announced_) return;
    announced_ = true;
    Beat last = mine;
    last.failed = 1;
    last.sent_us = micros(clock::now());
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || peers_[std::size_t(p)].error != MPI_SUCCESS) continue;
      last_words_[std::size_t(p)] = last;
      record(p,
             MPI_Isend(&last_words_[std::size_t(p)], fields, MPI_UINT64_T, p, tag, comm_, &farewell_[std::size_t(p)]));
    }
    const auto deadline = clock::now() + std::chrono::duration<double>(grace_s);
    for (bool pending = true; pending && clock::now() < deadline;) {
      pending = false;
      for (int p = 0; p < size_; ++p)
        if (farewell_[std::size_t(p)] != MPI_REQUEST_NULL && !test(farewell_[std::size_t(p)], p)) pending = true;
    }
  }

  /// The first peer that announced a failure, or -1.
  int failed_peer() const noexcept {
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && peers_[std::size_t(p)].beat.failed) return p;
    return -1;
  }
  /// The peers not heard from for more than `seconds` (or unreachable), in rank order.
  std::vector<int> silent(double seconds) const {
    const auto now = clock::now();
    std::vector<int> out;
    for (int p = 0; p < size_; ++p) {
      const Peer& q = peers_[std::size_t(p)];
      if (p == rank_ || q.beat.failed) continue;
      if (q.error != MPI_SUCCESS || std::chrono::duration<double>(now - q.last_heard).count() > seconds)
        out.push_back(p);
    }
    return out;
  }
  const Peer& peer(int p) const noexcept { return peers_[std::size_t(p)]; }
  double seconds_since_heard(int p) const noexcept {
    return std::chrono::duration<double>(clock::now() - peers_[std::size_t(p)].last_heard).count();
  }

 private:
  static constexpr int tag = 7301;
  static constexpr int fields = sizeof(Beat) / sizeof(std::uint64_t);

  static std::uint64_t micros(clock::time_point t) noexcept {
    return std::uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
  }
  void listen(int p) {
    record(p, MPI_Irecv(&in_[std::size_t(p)], fields, MPI_UINT64_T, p, tag, comm_, &recv_[std::size_t(p)]));
  }
  /// Drains every peer's queued beats: the latest one counts (an old beat still queued must not
  /// make a stopped rank look alive later).
  void receive(clock::time_point now) {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      for (int drained = 0; drained < 64 && recv_[std::size_t(p)] != MPI_REQUEST_NULL; ++drained) {
        if (!test(recv_[std::size_t(p)], p)) break;
        Peer& q = peers_[std::size_t(p)];
        q.beat = in_[std::size_t(p)];
        q.heard = true;
        q.offset_us = std::min(q.offset_us, std::int64_t(micros(now)) - std::int64_t(q.beat.sent_us));
        const auto sent = clock::time_point(std::chrono::microseconds(std::int64_t(q.beat.sent_us) + q.offset_us));
        q.last_heard = std::max(q.last_heard, sent);
        if (q.beat.failed) break; // its last word: it sends no more
        listen(p);
      }
    }
  }
  /// MPI_Test that records an error against peer `p` instead of throwing: a broken channel to a
  /// peer is itself news about that peer.
  bool test(MPI_Request& r, int p) {
    int done = 0;
    const int code = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) {
      record(p, code);
      r = MPI_REQUEST_NULL;
      return true;
    }
    return done != 0;
  }
  void record(int p, int code) {
    if (code != MPI_SUCCESS && peers_[std::size_t(p)].error == MPI_SUCCESS) peers_[std::size_t(p)].error = code;
  }

  MPI_Comm comm_;
  int rank_, size_;
  clock::duration interval_;
  clock::time_point next_poll_{}, next_beat_{};
  std::vector<Peer> peers_;
  std::vector<Beat> in_, out_, last_words_; // a buffer per peer: a pending send's must not change
  std::vector<MPI_Request> recv_, send_, farewell_;
  bool announced_ = false;
};

} // namespace cohort::detail
