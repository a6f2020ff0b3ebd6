// BatchPrefetcher (data/batch_prefetcher.hpp): jobs run on another thread, one at a time, in
// submission order; wait() returns after the job and rethrows its error; drain() swallows it;
// destruction finishes a submitted job.
#include <doctest/doctest.h>

#include <atomic>
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
