// MSELoss, L1Loss, SmoothL1Loss and HuberLoss (loss/regression_loss.hpp) against torch's, on
// (N, C, H, W) inputs with exact ties (d = 0) among them; finite differences away from the kinks;
// bad targets and options are typed errors naming the sample and element.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include <cohort/loss/regression_loss.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/gradcheck.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Image = Shape<3, 4, 5>;

template <class Loss>
void check_regression_fixture(const std::string& name, Loss loss) {
  CAPTURE(name);
  const auto f = fixture(name);
  const auto x = f.values<float>("x");
  const auto t = f.values<float>("t");
  const double value = loss.forward(ConstBatchView<Image, float>(x.data(), 2), t);
  // torch reduces in float, cohort in double: measured 6e-8 relative at most.
  CHECK(value == doctest::Approx(f.values<float>("loss")[0]).epsilon(1e-6));
  const ConstBatchView<Image, float> dx = loss.backward();
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), 1e-6, name + " dx");
}

template <class Loss>
void gradcheck_regression(Loss loss, const std::string& what) {
  std::mt19937_64 gen(11);
  std::normal_distribution<double> normal;
  std::vector<double> x(2 * 12), t(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    t[i] = normal(gen);
    x[i] = t[i] + (i % 2 ? 1.0 : -1.0) * (0.05 + std::abs(normal(gen))); // 0.05 from every kink of d = 0
  }
  const std::vector<float> tf(t.begin(), t.end());
  auto f = [&] { return loss.forward(ConstBatchView<Shape<3, 2, 2>, double>(x.data(), 2), tf); };
  f();
  const LossGradient<double> g = loss.backward();
  check_gradient(f, x, std::vector<double>(g.data(), g.data() + x.size()), {}, what);
}
} // namespace

TEST_CASE("regression losses: MSELoss, L1Loss, SmoothL1Loss(beta 0.5) and HuberLoss(delta 0.7) match PyTorch") {
  check_regression_fixture("loss_mse", MSELoss<float>{});
  check_regression_fixture("loss_l1", L1Loss<float>{});
  check_regression_fixture("loss_smooth_l1", SmoothL1Loss<float>({.beta = 0.5}));
  check_regression_fixture("loss_huber", HuberLoss<float>({.delta = 0.7}));
}

TEST_CASE("regression losses: gradients match finite differences (both sides of SmoothL1's and Huber's knees)") {
  // |d| is spread over (0.05, 3): some elements inside beta/delta, some outside.
  gradcheck_regression(MSELoss<double>{}, "MSELoss dx");
  gradcheck_regression(L1Loss<double>{}, "L1Loss dx");
  gradcheck_regression(SmoothL1Loss<double>({.beta = 0.8}), "SmoothL1Loss dx");
  gradcheck_regression(HuberLoss<double>({.delta = 0.6}), "HuberLoss dx");
  gradcheck_regression(SmoothL1Loss<double>({.beta = 0}), "SmoothL1Loss(beta 0) dx");
}

TEST_CASE("regression losses: SmoothL1 with beta 0 is L1, and the mean runs over every element of the batch") {
  const std::vector<float> x{1.f, -2.f, 0.5f, 4.f}, t{0.f, 0.f, 0.5f, 1.f};
  SmoothL1Loss<float> smooth({.beta = 0});
  L1Loss<float> l1;
  const ConstBatchView<Shape<2>, float> v(x.data(), 2);
  CHECK(smooth.forward(v, t) == l1.forward(v, t));
  CHECK(l1.forward(v, t) == doctest::Approx((1 + 2 + 0 + 3) / 4.0));
  MSELoss<float> mse;
  CHECK(mse.forward(v, t, 2.0) == doctest::Approx((1 + 4 + 0 + 9) / 4.0));
  const ConstBatchView<Shape<2>, float> g = mse.backward(); // d/dx of the mean, times grad_scale 2
  CHECK(g.span()[3] == doctest::Approx(2.0 * 2 * 3 / 4));
}

TEST_CASE("regression losses: bad targets and options are typed errors naming the sample and element") {
  std::vector<float> x(2 * Image::size, 0.f), t(2 * Image::size, 0.f);
  const ConstBatchView<Image, float> v(x.data(), 2);
  MSELoss<float> mse;
  CHECK_THROWS_WITH_AS(mse.forward(v, std::vector<float>(59, 0.f)),
                       "MSELoss: expected 120 targets (2 samples of 60 elements, one per input element), found 59",
                       ShapeError);
  t[60 + 17] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(mse.forward(v, t), "MSELoss: target of sample 1 at element 17 is nan, expected a finite value",
                       ValueError);
  CHECK_THROWS_AS(HuberLoss<float>({.delta = 0}), ValueError);
  CHECK_THROWS_AS(SmoothL1Loss<float>({.beta = -1}), ValueError);
}
