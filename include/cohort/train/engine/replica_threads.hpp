#pragma once
/// \file
/// One thread per replica, each replica always on the same thread (its device stays current,
/// its cuBLAS handle is reused), all replicas running at once:
///
///     detail::ReplicaThreads threads(4);           // replica 0 runs on the caller
///     threads.run([&](std::size_t r) { step(r); }); // returns when all four are done
///
/// The device ThreadedReplicas engine needs the "at once": a replica may wait inside its
/// all-reduce until every peer has started it (NCCL), so a pool that could run two replicas
/// one after the other on a thread, or leave one queued while a sleeping worker misses its
/// wake-up, would deadlock the step.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/core/function_ref.hpp"

namespace cohort::detail {

class ReplicaThreads {
 public:
  explicit ReplicaThreads(std::size_t replicas) : errors_(replicas) {
    for (std::size_t r = 1; r < replicas; ++r) threads_.emplace_back([this, r] { work(r); });
  }
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;
  ~ReplicaThreads() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }

  std::size_t size() const noexcept { return errors_.size(); }

  /// f(r) for every replica r, each on its own thread, concurrently; returns when all have
  /// returned, rethrowing the exception of the lowest replica that threw.
  template <class F>
  void run(F&& f) {
    const Job job(f);
    {
      std::lock_guard<std::mutex> g(mutex_);
      job_ = &job;
      pending_ = threads_.size();
      ++generation_;
      for (auto& e : errors_) e = nullptr;
    }
    start_.notify_all();
    try {
      job(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void work(std::size_t r) {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      const auto* job = job_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*job)(r);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      errors_[r] = error;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  // A reference to run's callable, which outlives the round (core/function_ref.hpp: not
  // std::function, which instantiated an invoker and a manager per callable).
  using Job = FunctionRef<void(std::size_t)>;
  const Job* job_ = nullptr;
  std::uint64_t generation_ = 0;
  std::size_t pending_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

} // namespace cohort::detail
