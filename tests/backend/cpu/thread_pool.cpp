#include <doctest/doctest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <string>
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
/// Everything one forward and backward pass produces with `threads` threads, in training or
/// evaluation mode: output, input gradient, parameter gradients, running statistics (updated in
/// training mode) and counters, concatenated as floats.
template <class Model, class Loss>
std::vector<float> one_pass(std::size_t threads, bool train, std::size_t batch) {
  set_num_threads(threads);
  REQUIRE(num_threads() == threads); // otherwise the comparison below would be of one thread count
  Network<Model> net(9);
  train ? net.train() : net.eval();
  Loss loss;
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(batch * 784);
  for (auto& v : x) v = u(gen);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = std::int32_t(i % 10);
  const auto y = net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), batch));
  std::vector<float> out(y.data(), y.data() + y.size());
  loss.forward(y, labels);
  const auto dx = net.backward(loss.backward(), {.input_grad = true});
  out.insert(out.end(), dx.data(), dx.data() + dx.size());
  out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
  out.insert(out.end(), net.parameters().buffers.begin(), net.parameters().buffers.end());
  for (auto c : net.parameters().counters) out.push_back(float(c));
  set_num_threads(1);
  return out;
}

/// 2 and 3 threads against 1, in both modes. The batch must be large enough for the kernels to
/// split their sums: small convolutions cut the weight gradient into batch / 16 chunks (at most
/// 8) with partial sums of their own (backend/cpu/conv2d.hpp), so batches of 48 give 3 chunks.
/// With the batches of 20 this test used to run, every such sum was one chunk. Model D runs 16
/// samples: its large layers split outputs, not sums, and it costs 40 times more per sample
/// (48 would take 80 s in the ThreadSanitizer build, tsan.*).
template <class Model, class Loss>
void check_thread_invariance(const std::string& name, std::size_t batch) {
  for (bool train : {true, false}) {
    CAPTURE(name);
    CAPTURE(train);
    const auto one = one_pass<Model, Loss>(1, train, batch);
    CHECK(one == one_pass<Model, Loss>(2, train, batch));
    CHECK(one == one_pass<Model, Loss>(3, train, batch));
  }
}
} // namespace

TEST_CASE("CPU kernels: 1, 2 and 3 threads give bitwise identical gradients (the residual networks' layers)") {
  // No-bias convolutions on both paths, average pools, the activations and BatchNorm1d, whose 96
  // features are split between threads.
  using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 3, 1, 1, false>, BatchNorm2d<8>, LeakyReLU<>,
                         Conv2d<8, 16, 3, 2, 1, false>, SiLU, AvgPool2d<2>, Conv2d<16, 16, 3, 1, 1, false>, GELU,
                         AdaptiveAvgPool2d<1>, Flatten, Linear<16, 96>, SiLU, BatchNorm1d<96>, ReLU, Linear<96, 10>>;
  check_thread_invariance<Net, CrossEntropyLoss<>>("issue 16 layers", 48);
}
TEST_CASE("CPU kernels: 1, 2 and 3 threads give bitwise identical gradients (models A-D)") {
  check_thread_invariance<models::ModelA, NllLoss<>>("model A", 48);
  check_thread_invariance<models::ModelB, CrossEntropyLoss<>>("model B", 48);
  check_thread_invariance<models::ModelC, CrossEntropyLoss<>>("model C", 48);
  check_thread_invariance<models::ModelD, CrossEntropyLoss<>>("model D", 16);
}
