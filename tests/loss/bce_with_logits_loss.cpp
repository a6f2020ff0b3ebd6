// BCEWithLogitsLoss (loss/bce_with_logits_loss.hpp) against torch's with a per-channel
// pos_weight, logits at +-40 and soft labels; finite differences; targets outside [0, 1] and a
// pos_weight count other than the channels are typed errors.

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <cohort/loss/bce_with_logits_loss.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/gradcheck.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("BCEWithLogitsLoss: matches PyTorch (pos_weight per channel, logits at +-40, soft labels)") {
  const auto f = fixture("loss_bce_logits");
  const auto x = f.values<float>("x");
  const auto w = f.values<float>("pos_weight");
  BCEWithLogitsLoss<float> bce({.pos_weight = {w.begin(), w.end()}});
  const double value = bce.forward(ConstBatchView<Shape<3, 4, 4>, float>(x.data(), 2), f.values<float>("t"));
  CHECK(value == doctest::Approx(f.values<float>("loss")[0]).epsilon(1e-6));
  const ConstBatchView<Shape<3, 4, 4>, float> dx = bce.backward();
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), 1e-6, "BCEWithLogitsLoss dx");
}

TEST_CASE("BCEWithLogitsLoss: gradients match finite differences (weighted, unweighted, (N, C) inputs)") {
  std::mt19937_64 gen(13);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit;
  std::vector<double> x(2 * 8);
  std::vector<float> t(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 3 * normal(gen), t[i] = i % 3 ? float(i % 2) : float(unit(gen));
  BCEWithLogitsLoss<double> weighted({.pos_weight = {2.5f, 0.25f}});
  auto f = [&] { return weighted.forward(ConstBatchView<Shape<2, 2, 2>, double>(x.data(), 2), t); };
  f();
  LossGradient<double> g = weighted.backward();
  check_gradient(f, x, std::vector<double>(g.data(), g.data() + x.size()), {}, "weighted dx");
  BCEWithLogitsLoss<double> plain;
  auto h = [&] { return plain.forward(ConstBatchView<Shape<8>, double>(x.data(), 2), t); };
  h();
  g = plain.backward();
  check_gradient(h, x, std::vector<double>(g.data(), g.data() + x.size()), {}, "(N, C) dx");
}

TEST_CASE("BCEWithLogitsLoss: bad targets and pos_weight are typed errors naming sample, element and channel") {
  std::vector<float> x(2 * 6, 0.f), t(2 * 6, 1.f);
  const ConstBatchView<Shape<2, 1, 3>, float> v(x.data(), 2);
  t[6 + 4] = 1.5f;
  BCEWithLogitsLoss<float> bce;
  CHECK_THROWS_WITH_AS(bce.forward(v, t),
                       "BCEWithLogitsLoss: target of sample 1 at element 4 is 1.5, expected a value "
                       "in [0, 1]",
                       ValueError);
  t[6 + 4] = 0.f;
  BCEWithLogitsLoss<float> three({.pos_weight = {1.f, 2.f, 3.f}});
  CHECK_THROWS_WITH_AS(three.forward(v, t),
                       "BCEWithLogitsLoss: 3 pos_weight values for an input of 2 channels, expected one per channel",
                       ShapeError);
  CHECK_THROWS_WITH_AS(BCEWithLogitsLoss<float>({.pos_weight = {1.f, -2.f}}),
                       "BCEWithLogitsLoss: pos_weight of channel 1 is -2, expected a finite value >= 0", ValueError);
  // log(2) at logit 0 whatever the target: the loss of an undecided prediction.
  CHECK(bce.forward(v, t) == doctest::Approx(std::log(2.0)));
}
