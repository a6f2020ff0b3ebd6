#pragma once
/// \file
/// One background thread that assembles the next batches while the current one trains (the
/// worker of PyTorch's DataLoader with pin_memory and prefetch_factor): the Trainer gives it a
/// job per batch, up to `depth` ahead, and waits for a batch only when it needs it. Jobs run one
/// at a time in submission order, so batch b is always gathered before batch b + 1.
/// Example (not compiled: a sketch: gather, train and the batches are the caller's):
///
///     BatchPrefetcher p(/*depth=*/2);
///     p.submit([&] { gather(batch_1); });      // return at once: two jobs may be outstanding
///     p.submit([&] { gather(batch_2); });
///     train(batch_0);
///     p.wait_next();                           // batch_1 is ready (or its exception is rethrown)

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace cohort {

class BatchPrefetcher {
 public:
  /// `depth`: how many jobs may be queued or running at once (at least 1).
  explicit BatchPrefetcher(std::size_t depth = 1) : depth_(depth ? depth : 1) {}
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;
  ~BatchPrefetcher() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::size_t depth() const noexcept { return depth_; }

  /// Queues `job` for the background thread (started on first use). Waits first while `depth`
  /// jobs are queued or running (without rethrowing their errors: wait_next() and wait() do).
  void submit(std::function<void()> job) {
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return unfinished() < depth_; });
    queue_.push_back(std::move(job));
    changed_.notify_all();
  }

  /// Waits for the oldest job whose result has not been collected yet and collects it:
  /// rethrows the exception it ended with. Returns at once when every result is collected.
  void wait_next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !results_.empty() || unfinished() == 0; });
    if (results_.empty()) return;
    std::exception_ptr e = std::move(results_.front());
    results_.pop_front();
    if (e) std::rethrow_exception(e);
  }

  /// Waits for every job and collects them all; rethrows the first exception among them.
  void wait() {
    std::exception_ptr first;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return unfinished() == 0; });
      for (auto& e : results_)
        if (e && !first) first = e;
      results_.clear();
    }
    if (first) std::rethrow_exception(first);
  }

  /// wait() that swallows the jobs' exceptions: for unwinding, when another error is on its way.
  void drain() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return unfinished() == 0; });
    results_.clear();
  }

 private:
  std::size_t unfinished() const noexcept { return queue_.size() + (running_ ? 1 : 0); }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return; // stopping with nothing to do
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      running_ = false;
      results_.push_back(error);
      changed_.notify_all();
    }
  }

  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_; // submitted, not yet taken by the thread
  bool running_ = false;                    // the thread is running a job
  std::deque<std::exception_ptr> results_;  // finished jobs' outcomes, oldest first, not yet collected
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace cohort
