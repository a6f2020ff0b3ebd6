// predict (network/predict.hpp) and Trainer::predict: eval-mode outputs for any number of
// samples, the same for any chunk size and thread count, probabilities by softmax (or exp after
// a final LogSoftmax), the network's mode restored.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/network/predict.hpp>

#include "support/bands.hpp"

using namespace cohort;

namespace {
template <class Net>
std::vector<float> forward_eval(Network<Net>& net, const std::vector<float>& x) {
  net.eval();
  const auto y = net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), x.size() / 784));
  std::vector<float> out(y.data(), y.data() + y.batch() * 10);
  net.train();
  return out;
}
} // namespace

TEST_CASE("predict: eval-mode scores for any number of samples, the same for every chunk size") {
  const test::Bands data(37, 2);
  Network<models::ModelB> net(4); // BatchNorm: train mode would use each chunk's own statistics
  const auto expected = forward_eval(net, data.x);
  for (const std::size_t chunk : {1, 5, 16, 37, 256}) {
    CAPTURE(chunk);
    CHECK(predict(net, data.x, Prediction::scores, chunk) == expected);
  }
  CHECK(net.training()); // the mode is restored
}

TEST_CASE("predict: probabilities are the softmax of the scores, or the exp of a final LogSoftmax") {
  const test::Bands data(9, 3);
  Network<models::ModelC> logits(1); // raw scores
  const auto s = predict(logits, data.x);
  const auto p = predict(logits, data.x, Prediction::probabilities);
  Network<models::ModelA> logp(1); // ends in LogSoftmax
  const auto ls = predict(logp, data.x);
  const auto lp = predict(logp, data.x, Prediction::probabilities);
  for (std::size_t i = 0; i < 9; ++i) {
    double sum = 0, sum_a = 0, z = 0;
    const float m = *std::max_element(s.begin() + std::ptrdiff_t(10 * i), s.begin() + std::ptrdiff_t(10 * i + 10));
    for (std::size_t k = 0; k < 10; ++k) z += std::exp(double(s[10 * i + k]) - m);
    for (std::size_t k = 0; k < 10; ++k) {
      sum += p[10 * i + k];
      sum_a += lp[10 * i + k];
      // float softmax against a double one: within 1e-6 relative (measured largest: 1.2e-7)
      CHECK(p[10 * i + k] == doctest::Approx(std::exp(double(s[10 * i + k]) - m) / z).epsilon(1e-6));
      CHECK(lp[10 * i + k] == std::exp(ls[10 * i + k]));
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(sum_a == doctest::Approx(1.0).epsilon(1e-5));
  }
  CHECK(predicted_classes<10>(p) == predicted_classes<10>(s));
}

TEST_CASE("predict: images that are not whole samples are a ShapeError") {
  Network<models::ModelC> net(1);
  const std::vector<float> x(784 * 2 + 5);
  CHECK_THROWS_WITH_AS(predict(net, x), doctest::Contains("1573 floats are not whole samples of 1x28x28"), ShapeError);
  CHECK_THROWS_AS(predict(net, std::vector<float>(784), Prediction::scores, 0), ValueError);
}

TEST_CASE("Trainer::predict: the trainer's weights and running statistics, the same for 1 and 2 threads") {
  const test::Bands data(64, 5);
  std::vector<std::vector<float>> results;
  for (const std::size_t threads : {1, 2}) {
    Trainer<models::ModelB, Sgd<>> t(Sgd({.lr = 0.05}),
                                     {.batch_size = 16, .eval_batch_size = 24, .threads = threads, .log = nullptr});
    t.fit(data, 1);
    results.push_back(t.predict(data.x, Prediction::probabilities));
    // The same as a network holding the trainer's tensors.
    Network<models::ModelB> net;
    const auto from = t.parameters().state_dict();
    const auto to = net.parameters().state_dict();
    for (std::size_t k = 0; k < to.size(); ++k) std::memcpy(to[k].data, from[k].data, to[k].bytes());
    CHECK(predict(net, data.x, Prediction::probabilities) == results.back());
    // Its accuracy is evaluate's.
    const auto k = predicted_classes<10>(results.back());
    std::size_t correct = 0;
    for (std::size_t i = 0; i < k.size(); ++i) correct += k[i] == std::size_t(data.y[i]);
    CHECK(100.0 * double(correct) / 64.0 == doctest::Approx(t.evaluate(data).accuracy));
  }
  CHECK(results[0] == results[1]);
}

TEST_CASE("Trainer: evaluation runs in chunks of at most a training batch, before and after training") {
  // eval_batch_size 100 over 64 samples would be one forward of 64; the chunks stay at 16, so the
  // activation buffers never grow past what training needs.
  const test::Bands data(64, 6);
  Trainer<models::ModelB, Sgd<>> t(Sgd({.lr = 0.05}), {.batch_size = 16, .eval_batch_size = 100, .log = nullptr});
  const auto& exec = t.engine().replica().executor();
  const EvalReport before = t.evaluate(data);
  CHECK(exec.capacity() == 16);
  t.fit(data, 1);
  CHECK(exec.capacity() == 16);
  const EvalReport after = t.evaluate(data);
  CHECK(exec.capacity() == 16);
  CHECK(after.samples == 64);
  // The accuracy is the whole-batch forward's (per-sample results do not depend on the chunk).
  const auto k = predicted_classes<10>(t.predict(data.x));
  std::size_t correct = 0;
  for (std::size_t i = 0; i < k.size(); ++i) correct += k[i] == std::size_t(data.y[i]);
  CHECK(100.0 * double(correct) / 64.0 == after.accuracy);
  CHECK(before.samples == 64);
}
