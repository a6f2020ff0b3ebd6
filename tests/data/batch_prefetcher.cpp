// BatchPrefetcher (data/batch_prefetcher.hpp): jobs run on another thread, one at a time, in
// submission order, at most `depth` outstanding; wait_next() collects the oldest job and
// rethrows its error; wait() collects them all; drain() swallows errors; destruction finishes
// the submitted jobs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <cohort/data/batch_prefetcher.hpp>

using cohort::BatchPrefetcher;

TEST_CASE("BatchPrefetcher: jobs run on a background thread, in order, one at a time") {
  BatchPrefetcher p;
  std::vector<int> done;
  std::atomic<int> running{0};
  std::thread::id worker;
  for (int i = 0; i < 50; ++i) {
    p.submit([&, i] {
      CHECK(running.fetch_add(1) == 0); // never two at once
      worker = std::this_thread::get_id();
      done.push_back(i);
      running.fetch_sub(1);
    });
    if (i % 7 == 0) p.wait();
  }
  p.wait();
  CHECK(worker != std::this_thread::get_id());
  REQUIRE(done.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(done[std::size_t(i)] == i);
}

TEST_CASE("BatchPrefetcher: wait rethrows the job error once, drain swallows it") {
  BatchPrefetcher p;
  p.submit([] { throw std::runtime_error("sample 17 is unreadable"); });
  CHECK_THROWS_WITH_AS(p.wait(), "sample 17 is unreadable", std::runtime_error);
  p.wait(); // reported once
  p.submit([] { throw std::runtime_error("again"); });
  p.drain();
  CHECK_NOTHROW(p.wait());
  int ran = 0;
  p.submit([&] { ++ran; }); // still usable after errors
  p.wait();
  CHECK(ran == 1);
}

TEST_CASE("BatchPrefetcher: destruction lets a submitted job finish") {
  std::atomic<bool> finished{false};
  {
    BatchPrefetcher p;
    p.submit([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished = true;
    });
  }
  CHECK(finished);
  BatchPrefetcher unused; // never started: nothing to join
}

TEST_CASE("BatchPrefetcher: up to depth jobs are outstanding, collected oldest first") {
  BatchPrefetcher p(3);
  CHECK(p.depth() == 3);
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  const auto gate = [&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return open; });
  };
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) // three outstanding: none of these waits, though the first job blocks
    p.submit([&, i] {
      if (i == 0) gate();
      if (i == 1) throw std::runtime_error("batch 1 failed");
      ran.fetch_add(1);
    });
  std::atomic<bool> fourth_submitted{false};
  std::thread submitter([&] {
    p.submit([&] { ran.fetch_add(1); }); // a fourth waits for a free place
    fourth_submitted = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_FALSE(fourth_submitted.load());
  {
    std::lock_guard<std::mutex> g(m);
    open = true;
  }
  cv.notify_all();
  submitter.join();
  CHECK(fourth_submitted.load());
  CHECK_NOTHROW(p.wait_next()); // job 0
  CHECK_THROWS_WITH_AS(p.wait_next(), "batch 1 failed", std::runtime_error);
  CHECK_NOTHROW(p.wait_next()); // job 2
  CHECK_NOTHROW(p.wait_next()); // job 3
  CHECK_NOTHROW(p.wait_next()); // nothing left: returns at once
  CHECK(ran == 3);
}

TEST_CASE("BatchPrefetcher: wait collects every job and rethrows the first error") {
  BatchPrefetcher p(4);
  p.submit([] {});
  p.submit([] { throw std::runtime_error("first"); });
  p.submit([] { throw std::runtime_error("second"); });
  CHECK_THROWS_WITH_AS(p.wait(), "first", std::runtime_error);
  CHECK_NOTHROW(p.wait_next()); // all collected
}
