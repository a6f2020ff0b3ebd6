#pragma once
/// \file
/// The process's one pool of intra-op threads for the CPU backend.
///
///     cohort::set_num_threads(2);                      // what --threads does
///     cohort::ThreadPool::global().parallel_for(n, 8, [&](std::size_t lo, std::size_t hi) { ... });
///
/// Kernels split their *outputs* between tasks (rows of a GEMM, samples, channels), never a
/// sum: every output element is computed by one task in one fixed order, so results are
/// bitwise identical for any thread count. The pool owns all threads the CPU backend uses;
/// nothing else (no OpenMP, no threaded BLAS) starts threads, so 2 threads on 2 cores never
/// oversubscribe.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/function_ref.hpp"

namespace cohort {

/// Persistent worker threads; the calling thread works too.
class ThreadPool {
 public:
  explicit ThreadPool(std::size_t threads = 1) { resize(threads); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() { stop(); }

  /// The pool every CPU context uses unless given another.
  static ThreadPool& global() {
    static ThreadPool pool(1);
    return pool;
  }

  std::size_t size() const noexcept { return workers_.size() + 1; }

  /// Sets the number of threads (the caller counts as one). Not while a parallel_for runs.
  void resize(std::size_t threads) {
    if (threads == 0) throw ValueError("ThreadPool: the number of threads must be at least 1");
    if (threads == size() && (threads == 1 || !workers_.empty())) return;
    stop();
    stopping_.store(false);
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  /// Calls fn(lo, hi) on consecutive ranges covering [0, n), each at least `grain` long (but the
  /// last), spread over the threads. Blocks until all ranges are done; rethrows the first
  /// exception a range threw.
  template <class Fn>
  void parallel_for(std::size_t n, std::size_t grain, Fn&& fn) {
    if (n == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t chunks = std::min({(n + grain - 1) / grain, size() * 4, max_tasks});
    if (chunks <= 1 || workers_.empty()) {
      fn(std::size_t(0), n);
      return;
    }
    const std::size_t per = (n + chunks - 1) / chunks;
    const auto task = [&](std::size_t c) {
      const std::size_t lo = c * per, hi = std::min(n, lo + per);
      if (lo < hi) fn(lo, hi);
    };
    run(chunks, Task(task));
  }

 private:
  // Tasks are claimed from `ticket_`: generation in the high 32 bits, the round's task count in
  // the next 16, the next task index in the low 16. Everything a claim is checked against lives
  // in the one word the claim's compare-exchange tests: a worker preempted between reading a
  // ticket and claiming from it cannot mix one round's ticket with the next round's task count
  // (which ran a task of the next round early, twice, and left the count of pending tasks
  // wrapped: the pool hung). A straggler's claim on an old ticket fails, because that round is
  // over only once its index has reached its count.
  static constexpr std::uint64_t field_mask = 0xFFFFu;
  static constexpr std::size_t max_tasks = 0xFFFFu;
  // Kernels call parallel_for dozens of times per training step: workers and the caller spin
  // this many rounds (some tens of microseconds) before sleeping, so a step does not pay a
  // futex wake-up per layer.
  static constexpr int spin_rounds = 20000;

  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // What a round's workers call: a reference to parallel_for's lambda, which outlives the round
  // (run returns only when every task is done). Not std::function: core/function_ref.hpp.
  using Task = detail::FunctionRef<void(std::size_t)>;

  void run(std::size_t tasks, const Task& task) {
    task_.store(&task, std::memory_order_relaxed);
    pending_.store(tasks, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> g(mutex_);
      error_ = nullptr;
    }
    const std::uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    ticket_.store((gen << 32) | (std::uint64_t(tasks) << 16), std::memory_order_release);
    generation_.store(gen, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> g(mutex_);
      wake_.notify_all();
    }
    drain(gen);
    for (int i = 0; i < spin_rounds && pending_.load(std::memory_order_acquire) != 0; ++i) pause();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    if (error_) std::rethrow_exception(error_);
  }

  /// Runs tasks of generation `gen` until none are left.
  void drain(std::uint64_t gen) {
    std::size_t finished = 0;
    while (true) {
      std::uint64_t t = ticket_.load(std::memory_order_acquire);
      if ((t >> 32) != (gen & 0xFFFFFFFFu)) break;
      const std::uint64_t index = t & field_mask, tasks = (t >> 16) & field_mask;
      if (index >= tasks) break;
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
      // Read after the claim: the round cannot end (and task_ cannot change) before this task
      // is counted as done.
      const auto* task = task_.load(std::memory_order_acquire);
      try {
        (*task)(std::size_t(index));
      } catch (...) {
        std::lock_guard<std::mutex> g(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      ++finished;
    }
    if (finished && pending_.fetch_sub(finished, std::memory_order_acq_rel) == finished) {
      std::lock_guard<std::mutex> g(mutex_); // the caller may be asleep on done_
      done_.notify_all();
    }
  }

  void work() {
    std::uint64_t seen = generation_.load(std::memory_order_acquire);
    while (true) {
      for (int i = 0; i < spin_rounds && generation_.load(std::memory_order_acquire) == seen && !stopping_.load(); ++i)
        pause();
      if (generation_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleeping_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return stopping_.load() || generation_.load(std::memory_order_seq_cst) != seen; });
        sleeping_.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (stopping_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      drain(seen);
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<const Task*> task_{nullptr};
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::uint64_t> ticket_{0}, generation_{0};
  std::atomic<int> sleeping_{0};
  std::exception_ptr error_;
  std::atomic<bool> stopping_{false};
};

/// Sets the number of threads of the global CPU pool (1 = everything on the calling thread).
inline void set_num_threads(std::size_t threads) { ThreadPool::global().resize(threads); }
inline std::size_t num_threads() { return ThreadPool::global().size(); }

} // namespace cohort
