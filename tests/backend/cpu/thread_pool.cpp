#include <doctest/doctest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

using namespace cohort;

TEST_CASE("ThreadPool: every index exactly once, for any size and grain") {
  ThreadPool pool(3);
  CHECK(pool.size() == 3);
  for (std::size_t n : {0, 1, 5, 64, 1000, 12345})
    for (std::size_t grain : {1, 7, 100}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, grain, [&](std::size_t lo, std::size_t hi) {
        REQUIRE(lo < hi);
        for (std::size_t i = lo; i < hi; ++i) ++hits[i];
      });
      for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
    }
}

TEST_CASE("ThreadPool: exceptions reach the caller, the pool stays usable, resize works") {
  ThreadPool pool(2);
  CHECK_THROWS_WITH_AS(pool.parallel_for(100, 1,
                                         [](std::size_t lo, std::size_t) {
                                           if (lo > 50) throw std::runtime_error("boom");
                                         }),
                       "boom", std::runtime_error);
  std::atomic<std::size_t> sum{0};
  pool.parallel_for(100, 1, [&](std::size_t lo, std::size_t hi) { sum += hi - lo; });
  CHECK(sum == 100);
  pool.resize(1);
  CHECK(pool.size() == 1);
  pool.resize(4);
  sum = 0;
  for (int rep = 0; rep < 200; ++rep) // many short rounds: no lost or repeated tasks
    pool.parallel_for(37, 1, [&](std::size_t lo, std::size_t hi) { sum += hi - lo; });
  CHECK(sum == 200 * 37);
  CHECK_THROWS_AS(pool.resize(0), ValueError);
}

TEST_CASE("ThreadPool: back-to-back rounds of changing sizes never lose, repeat or leak a task (oversubscribed)") {
  // More threads than cores, so workers are preempted between reading a round's ticket and
  // claiming from it: a straggler from one round must never run (or count) a task of the next.
  ThreadPool pool(6);
  std::vector<std::atomic<int>> hits(64);
  std::size_t wrong = 0;
  for (int round = 0; round < 200000 && wrong == 0; ++round) {
    const std::size_t n = round % 3 == 0 ? 2 : round % 3 == 1 ? 24 : 7;
    for (std::size_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
    pool.parallel_for(n, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (std::size_t i = 0; i < n; ++i) wrong += hits[i].load(std::memory_order_relaxed) != 1;
  }
  CHECK(wrong == 0);
}

namespace {
/// Gradients and parameters after one training step with `threads` threads.
template <class Model, class Loss>
std::vector<float> one_step(std::size_t threads) {
  set_num_threads(threads);
  Network<Model> net(9);
  Loss loss;
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(20 * 784);
  for (auto& v : x) v = u(gen);
  std::vector<std::int32_t> labels(20);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = std::int32_t(i % 10);
  loss.forward(net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), 20)), labels);
  net.backward(loss.backward(), {.input_grad = true});
  std::vector<float> out(net.gradients().values.begin(), net.gradients().values.end());
  const auto dx =
      net.executor().backward(net.context(), net.parameters(), net.gradients(), loss.backward(), {.input_grad = true});
  out.insert(out.end(), dx.data(), dx.data() + dx.size());
  set_num_threads(1);
  return out;
}
} // namespace

TEST_CASE("CPU kernels: 1, 2 and 3 threads give bitwise identical gradients (models A-D)") {
  const auto a1 = one_step<models::ModelA, NllLoss<>>(1);
  CHECK(a1 == one_step<models::ModelA, NllLoss<>>(2));
  CHECK(a1 == one_step<models::ModelA, NllLoss<>>(3));
  const auto b1 = one_step<models::ModelB, CrossEntropyLoss<>>(1);
  CHECK(b1 == one_step<models::ModelB, CrossEntropyLoss<>>(2));
  const auto c1 = one_step<models::ModelC, CrossEntropyLoss<>>(1);
  CHECK(c1 == one_step<models::ModelC, CrossEntropyLoss<>>(2));
  const auto d1 = one_step<models::ModelD, CrossEntropyLoss<>>(1);
  CHECK(d1 == one_step<models::ModelD, CrossEntropyLoss<>>(2));
}
