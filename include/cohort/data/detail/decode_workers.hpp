#pragma once
/// \file
/// A fixed pool of threads that run one job per item of a batch (ImageFolder's decoders). Items
/// are taken from a shared counter, so which thread runs which item varies; callers make every
/// item's result depend on the item alone, and the pool rethrows the error of the lowest failing
/// item, so results and messages are the same for any number of workers.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort::detail {

class DecodeWorkers {
 public:
  /// `threads` background threads (0: run() does every item on the calling thread).
  explicit DecodeWorkers(std::size_t threads) {
    for (std::size_t t = 0; t < threads; ++t) threads_.emplace_back([this] { work(); });
  }
  DecodeWorkers(const DecodeWorkers&) = delete;
  DecodeWorkers& operator=(const DecodeWorkers&) = delete;
  ~DecodeWorkers() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  std::size_t size() const noexcept { return threads_.size(); }

  /// Runs job(i) for every i in [0, count) and returns when all are done; rethrows the
  /// exception of the lowest i that failed (the others still ran). One run at a time: concurrent
  /// callers (two trainers on one dataset) take turns.
  void run(std::size_t count, const std::function<void(std::size_t)>& job) {
    std::lock_guard<std::mutex> one_run(run_mutex_);
    errors_.assign(count, nullptr);
    if (threads_.empty()) {
      for (std::size_t i = 0; i < count; ++i) run_one(job, i);
    } else {
      {
        std::lock_guard<std::mutex> g(mutex_);
        job_ = &job;
        count_ = count;
        next_.store(0);
        active_ = threads_.size();
        ++generation_;
      }
      wake_.notify_all();
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return active_ == 0; });
      job_ = nullptr;
    }
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void run_one(const std::function<void(std::size_t)>& job, std::size_t i) {
    try {
      job(i);
    } catch (...) {
      errors_[i] = std::current_exception(); // each item owns its slot: no lock needed
    }
  }

  void work() {
    std::size_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      const auto* job = job_;
      const std::size_t count = count_;
      lock.unlock();
      for (std::size_t i = next_.fetch_add(1); i < count; i = next_.fetch_add(1)) run_one(*job, i);
      lock.lock();
      if (--active_ == 0) done_.notify_all();
    }
  }

  std::mutex run_mutex_; // one run() at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t count_ = 0, active_ = 0, generation_ = 0;
  std::atomic<std::size_t> next_{0};
  std::vector<std::exception_ptr> errors_;
  bool stopping_ = false;
  std::vector<std::thread> threads_; // last: started after every member they read exists
};

} // namespace cohort::detail
