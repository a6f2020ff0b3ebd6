#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include <xtensor/xtensor.hpp>

#include "support/layer_harness.hpp"

#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

using namespace cohort;
using namespace cohort::test;

// GCC cannot see that these replacements pair malloc/aligned_alloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts every heap allocation in this test binary (tests run one at a time).
namespace {
std::atomic<std::size_t> g_allocations{0};
}
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  ++g_allocations;
  if (void* p = std::aligned_alloc(std::size_t(a), (n + std::size_t(a) - 1) / std::size_t(a) * std::size_t(a)))
    return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {
template <class Model>
std::vector<float> random_images(std::size_t batch, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(batch * Model::input_shape::size);
  for (auto& v : x) v = u(gen);
  return x;
}
} // namespace

TEST_CASE("Network: no heap allocation after the first step, even with a smaller last batch") {
  using models::ModelB;
  Network<ModelB> net(1);
  CrossEntropyLoss loss;
  Sgd opt({.lr = 0.01, .momentum = 0.9});
  const auto x = random_images<ModelB>(32, 1);
  std::vector<std::int32_t> labels(32);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = std::int32_t(i % 10);
  auto step = [&](std::size_t batch) {
    auto y = net.forward(ConstBatchView<ModelB::input_shape, float>(x.data(), batch));
    loss.forward(y, std::span<const std::int32_t>(labels.data(), batch));
    net.backward(loss.backward());
    opt.step(net);
  };
  step(32); // the first step allocates activations, scratch and optimiser state
  const std::size_t before = g_allocations.load();
  for (int i = 0; i < 3; ++i) step(32);
  step(7); // an epoch's short last batch
  step(32);
  CHECK(g_allocations.load() == before);
}

TEST_CASE("Network: accumulate adds to the gradients, zero_grad clears them") {
  using models::ModelC;
  Network<ModelC> net(2);
  CrossEntropyLoss loss;
  const auto x = random_images<ModelC>(4, 2);
  const std::vector<std::int32_t> labels{1, 2, 3, 4};
  auto y = net.forward(ConstBatchView<ModelC::input_shape, float>(x.data(), 4));
  loss.forward(y, labels);
  net.backward(loss.backward());
  const std::vector<float> once(net.gradients().values.begin(), net.gradients().values.end());
  net.forward(ConstBatchView<ModelC::input_shape, float>(x.data(), 4));
  loss.forward(y, labels);
  net.backward(loss.backward(), {.accumulate = true});
  std::vector<float> twice_expected(once);
  for (auto& v : twice_expected) v *= 2;
  COHORT_CHECK_CLOSE(std::span<const float>(net.gradients().values.begin(), net.gradients().values.end()),
                     std::span<const float>(twice_expected), 1e-6, "accumulated gradients");
  net.zero_grad();
  for (float v : net.gradients().values) REQUIRE(v == 0.f);
}

TEST_CASE("Network: per-sample outputs do not depend on the batch they are in (eval mode)") {
  using models::ModelB;
  Network<ModelB> net(3);
  net.eval();
  const auto x = random_images<ModelB>(9, 3);
  auto all = net.forward(ConstBatchView<ModelB::input_shape, float>(x.data(), 9));
  const std::vector<float> full(all.data(), all.data() + all.size());
  auto part = net.forward(ConstBatchView<ModelB::input_shape, float>(x.data() + 4 * 784, 5));
  COHORT_CHECK_CLOSE(part.span(), std::span<const float>(full.data() + 40, 50), 1e-6, "samples 4..8");
}

TEST_CASE("Network: wrong input shapes and batch sizes are typed errors") {
  using models::ModelA;
  Network<ModelA> net;
  xt::xtensor<float, 4> wrong = xt::zeros<float>({2, 1, 32, 32});
  CHECK_THROWS_WITH_AS(net.forward(wrong), "Network input: expected a batch of shape N x 1x28x28, found 2x1x32x32",
                       ShapeError);
  xt::xtensor<float, 4> good = xt::zeros<float>({2, 1, 28, 28});
  net.forward(good);
  std::vector<float> dy(3 * 10);
  CHECK_THROWS_AS(net.backward(ConstBatchView<Shape<10>, float>(dy.data(), 3)), ShapeError);
  CHECK_THROWS_AS(net.forward(ConstBatchView<Shape<1, 28, 28>, float>(good.data(), 0)), ValueError);
}

TEST_CASE("Network: a whole network's gradients match finite differences") {
  using Net = Sequential<Input<2, 6, 6>, Conv2d<2, 3, 3, 1, 1>, BatchNorm2d<3>, ReLU, MaxPool2d<2>, Dropout2d<0.2f>,
                         Flatten, Linear<27, 5>, Dropout<0.2f>, LogSoftmax>;
  Network<Net, double> net(4);
  std::vector<double> x(3 * 72);
  std::mt19937_64 gen(4);
  std::normal_distribution<double> normal;
  for (auto& v : x) v = normal(gen);
  check_network_gradients(net, x, 3, Mode::train);
  check_network_gradients(net, x, 3, Mode::eval);
}

TEST_CASE("Network: the same seed gives the same weights, another seed different ones") {
  Network<models::ModelC> a(7), b(7), c(8);
  CHECK(std::equal(a.parameters().values.begin(), a.parameters().values.end(), b.parameters().values.begin()));
  CHECK_FALSE(std::equal(a.parameters().values.begin(), a.parameters().values.end(), c.parameters().values.begin()));
}

TEST_CASE("Network: fusing ReLU (and max-pool) into the layer before changes nothing, bitwise (models A, B, C)") {
  auto run = [](auto& net, bool fusion, const std::vector<float>& x, const std::vector<std::int32_t>& labels) {
    net.executor().set_fusion(fusion);
    CrossEntropyLoss loss;
    auto y = net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), labels.size()));
    std::vector<float> out(y.data(), y.data() + y.size());
    loss.forward(y, labels);
    auto dx = net.backward(loss.backward(), {.input_grad = true});
    out.insert(out.end(), dx.data(), dx.data() + dx.size());
    out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
    return out;
  };
  const auto x = random_images<models::ModelA>(6, 5);
  const std::vector<std::int32_t> labels{0, 1, 2, 3, 4, 5};
  Network<models::ModelA> a1(1), a2(1);
  a1.eval(); // no dropout: the two runs must see the same data
  a2.eval();
  CHECK(run(a1, true, x, labels) == run(a2, false, x, labels));
  Network<models::ModelC> c1(2), c2(2);
  CHECK(run(c1, true, x, labels) == run(c2, false, x, labels));
  Network<models::ModelB> b1(3), b2(3); // BatchNorm2d -> ReLU, training-mode statistics
  CHECK(run(b1, true, x, labels) == run(b2, false, x, labels));
}

TEST_CASE("Network::activation_bytes: every layer's output and a block's branches, from the shapes") {
  // Model A: conv 16x26x26, ReLU, conv 32x24x24, ReLU, pool 32x12x12, Dropout2d, (Flatten keeps
  // nothing), Linear 64, ReLU, Dropout, Linear 10, LogSoftmax; plus two gradient buffers of the
  // largest layer input (32x24x24, what the second ReLU takes).
  constexpr std::size_t kept = 10816 * 2 + 18432 * 2 + 4608 * 2 + 64 * 3 + 10 * 2;
  static_assert(Network<models::ModelA>::activation_bytes(1) == (kept + 2 * 18432) * sizeof(float));
  static_assert(Network<models::ModelA>::activation_bytes(128) == 128 * Network<models::ModelA>::activation_bytes(1));
  // A residual block keeps its body's and its projection's outputs besides its own.
  using Block = Sequential<Input<8, 4, 4>, models::BasicBlock<8, 16, 2>>;
  constexpr std::size_t body = 5 * 64;     // conv BN ReLU conv BN, each 16x2x2
  constexpr std::size_t shortcut = 2 * 64; // conv BN, 16x2x2
  static_assert(Network<Block>::activation_bytes(1) == (64 + body + shortcut + 2 * 128) * sizeof(float));
}
