// DiceLoss (loss/dice_loss.hpp) against its definition written in torch (autograd for the
// gradient), with ignored pixels and a class no pixel has; finite differences; bad labels and
// options are typed errors.

#include <doctest/doctest.h>

#include <random>

#include <cohort/loss/dice_loss.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/gradcheck.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("DiceLoss: matches the soft Dice written in torch (ignored pixels, an absent class, smooth 0.5)") {
  const auto f = fixture("loss_dice");
  const auto x = f.values<float>("x");
  DiceLoss<float> dice({.smooth = 0.5, .ignore_index = 255});
  const double value =
      dice.forward(ConstBatchView<Shape<4, 3, 5>, float>(x.data(), 2), f.values<std::int32_t>("labels"));
  CHECK(value == doctest::Approx(f.values<float>("loss")[0]).epsilon(1e-6));
  const ConstBatchView<Shape<4, 3, 5>, float> dx = dice.backward();
  // torch's softmax is float here: measured 2e-7 relative.
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), 1e-5, "DiceLoss dx");
}

TEST_CASE("DiceLoss: gradients match finite differences, a perfect prediction scores near 0") {
  std::mt19937_64 gen(17);
  std::normal_distribution<double> normal;
  std::vector<double> x(2 * 3 * 2 * 2);
  for (auto& v : x) v = 2 * normal(gen);
  const std::vector<std::int32_t> labels{0, 2, -100, 1, 1, -100, 2, 0};
  DiceLoss<double> dice;
  auto f = [&] { return dice.forward(ConstBatchView<Shape<3, 2, 2>, double>(x.data(), 2), labels); };
  f();
  const LossGradient<double> g = dice.backward();
  check_gradient(f, x, std::vector<double>(g.data(), g.data() + x.size()), {}, "d loss / d x");
  for (std::size_t i = 0; i < g.batch() * g.features(); ++i)
    if (labels[i / 12 * 4 + i % 4] == -100) CHECK(g.data()[i] == 0.0); // ignored pixels learn nothing
  // Scores of +-30 towards the labels: every class's overlap is its whole count.
  std::vector<double> sure(x.size());
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t p = 0; p < 4; ++p) sure[n * 12 + c * 4 + p] = labels[n * 4 + p] == std::int32_t(c) ? 30 : -30;
  CHECK(dice.forward(ConstBatchView<Shape<3, 2, 2>, double>(sure.data(), 2), labels) < 1e-12);
}

TEST_CASE("DiceLoss: bad labels and options are typed errors") {
  std::vector<float> x(2 * 3 * 4, 0.f);
  std::vector<std::int32_t> labels(8, 0);
  labels[5] = 3; // sample 1, pixel (0, 1)
  DiceLoss<float> dice;
  CHECK_THROWS_WITH_AS(dice.forward(ConstBatchView<Shape<3, 2, 2>, float>(x.data(), 2), labels),
                       "DiceLoss: label of sample 1 at pixel (0, 1) is 3, expected a class in [0, 3) or the "
                       "ignore_index -100",
                       ValueError);
  CHECK_THROWS_AS(DiceLoss<float>({.smooth = 0}), ValueError);
}
