#include <doctest/doctest.h>

#include <random>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
template <template <class, class> class Loss>
void check_loss_fixture(const std::string& name) {
  const auto f = fixture(name);
  const auto x = f.values<float>("x");
  const auto labels = f.values<std::int32_t>("labels");
  Loss<float, Cpu> loss;
  const double value = loss.forward(ConstBatchView<Shape<10>, float>(x.data(), labels.size()), labels);
  CHECK(value == doctest::Approx(f.values<float>("loss")[0]).epsilon(1e-6));
  const ConstBatchView<Shape<10>, float> dx = loss.backward();
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), layer_rtol, name + " dx");
}

template <template <class, class> class Loss>
void gradcheck_loss() {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> normal;
  std::vector<double> x(4 * 6);
  for (auto& v : x) v = 3 * normal(gen);
  const std::vector<std::int32_t> labels{0, 5, 2, 2};
  Loss<double, Cpu> loss;
  auto f = [&] { return loss.forward(ConstBatchView<Shape<6>, double>(x.data(), 4), labels); };
  f();
  const LossGradient<double> g = loss.backward();
  const std::vector<double> analytic(g.data(), g.data() + x.size());
  check_gradient(f, x, analytic, {}, "d loss / d x");
}
} // namespace

TEST_CASE("NllLoss: matches PyTorch") { check_loss_fixture<NllLoss>("loss_nll"); }
TEST_CASE("CrossEntropyLoss: matches PyTorch, stable with a logit of +60") {
  check_loss_fixture<CrossEntropyLoss>("loss_cross_entropy");
}
TEST_CASE("NllLoss: gradients match finite differences") { gradcheck_loss<NllLoss>(); }
TEST_CASE("CrossEntropyLoss: gradients match finite differences") { gradcheck_loss<CrossEntropyLoss>(); }

TEST_CASE("Losses: bad labels are typed errors naming the sample") {
  std::vector<float> x(3 * 10, 0.f);
  CrossEntropyLoss ce;
  const ConstBatchView<Shape<10>, float> v(x.data(), 3);
  CHECK_THROWS_WITH_AS(ce.forward(v, std::vector<std::int32_t>{1, 10, 2}),
                       "CrossEntropyLoss: label of sample 1 is 10, expected a class in [0, 10)", ValueError);
  CHECK_THROWS_AS(ce.forward(v, std::vector<std::int32_t>{1, -1, 2}), ValueError);
  CHECK_THROWS_WITH_AS(ce.forward(v, std::vector<std::int32_t>{1, 2}),
                       "CrossEntropyLoss: expected 3 labels (one per sample), found 2", ShapeError);
  NllLoss nll;
  CHECK_THROWS_AS(nll.forward(v, std::vector<std::int32_t>{0, 0, 11}), ValueError);
}

TEST_CASE("Loss gradient converts only to a batch view of the same width") {
  std::vector<float> x(2 * 10, 0.f);
  CrossEntropyLoss ce;
  ce.forward(ConstBatchView<Shape<10>, float>(x.data(), 2), std::vector<std::int32_t>{0, 1});
  using Wrong = ConstBatchView<Shape<12>, float>;
  CHECK_THROWS_AS((void)Wrong(ce.backward()), ShapeError);
}
