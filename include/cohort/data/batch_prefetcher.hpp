#pragma once
/// \file
/// One background thread that assembles the next batch while the current one trains (the
/// worker of PyTorch's DataLoader with pin_memory): the Trainer gives it a job per batch and
/// waits for it only when it needs that batch.
/// Example (not compiled: a sketch: gather, train and the batches are the caller's):
///
///     BatchPrefetcher p;
///     p.submit([&] { gather(next_batch); });   // returns at once
///     train(current_batch);
///     p.wait();                                // next_batch is ready (or its exception is rethrown)

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace cohort {

class BatchPrefetcher {
 public:
  BatchPrefetcher() = default;
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

  /// Runs `job` on the background thread (started on first use). At most one job is in
  /// flight: submit waits for the previous one first (without rethrowing: wait() does).
  void submit(std::function<void()> job) {
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    job_ = std::move(job);
    busy_ = true;
    changed_.notify_all();
  }

  /// Waits for the job in flight (if any); rethrows the exception it ended with.
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  /// wait() that swallows the job's exception: for unwinding, when another error is on its way.
  void drain() noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    error_ = nullptr;
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || job_; });
      if (!job_) return; // stopping with nothing to do
      std::function<void()> job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      busy_ = false;
      error_ = error;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_; // submitted, not yet taken by the thread
  bool busy_ = false;         // a job is submitted or running
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace cohort
