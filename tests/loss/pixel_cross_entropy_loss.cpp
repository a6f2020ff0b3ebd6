// PixelCrossEntropyLoss (loss/pixel_cross_entropy_loss.hpp) against torch.nn.CrossEntropyLoss on
// (N, C, H, W) scores: plain, ignore_index, class weights with label smoothing; finite
// differences; bad labels named by sample and pixel.

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <cohort/loss/pixel_cross_entropy_loss.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Scores = Shape<4, 3, 5>;

void check_pixel_fixture(const std::string& name, PixelCrossEntropyOptions o) {
  CAPTURE(name);
  const auto f = fixture(name);
  const auto x = f.values<float>("x");
  const auto labels = f.values<std::int32_t>("labels");
  PixelCrossEntropyLoss<float> loss(std::move(o));
  const double value = loss.forward(ConstBatchView<Scores, float>(x.data(), 2), labels);
  // torch reduces in float, cohort in double: measured 1e-7 relative at most.
  CHECK(value == doctest::Approx(f.values<float>("loss")[0]).epsilon(1e-6));
  const ConstBatchView<Scores, float> dx = loss.backward();
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), layer_rtol, name + " dx");
}
} // namespace

TEST_CASE("PixelCrossEntropyLoss: matches PyTorch (plain, ignore_index, weights with label smoothing)") {
  check_pixel_fixture("loss_pixel_ce", {});
  check_pixel_fixture("loss_pixel_ce_ignore", {.ignore_index = 255});
  const auto w = fixture("loss_pixel_ce_weighted_smoothed").values<float>("weights");
  check_pixel_fixture("loss_pixel_ce_weighted_smoothed",
                      {.ignore_index = 255, .label_smoothing = 0.2, .class_weights = {w.begin(), w.end()}});
}

TEST_CASE("PixelCrossEntropyLoss: gradients match finite differences (weights, smoothing, ignored pixels)") {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> normal;
  std::vector<double> x(2 * 3 * 2 * 2);
  for (auto& v : x) v = 2 * normal(gen);
  const std::vector<std::int32_t> labels{0, 2, -100, 1, 1, -100, 2, 0};
  PixelCrossEntropyLoss<double> loss({.label_smoothing = 0.1, .class_weights = {1.0f, 0.5f, 2.0f}});
  auto f = [&] { return loss.forward(ConstBatchView<Shape<3, 2, 2>, double>(x.data(), 2), labels); };
  f();
  const LossGradient<double> g = loss.backward();
  const std::vector<double> analytic(g.data(), g.data() + x.size());
  check_gradient(f, x, analytic, {}, "d loss / d x");
}

TEST_CASE("PixelCrossEntropyLoss: bad labels and counts are typed errors naming the sample and pixel") {
  std::vector<float> x(2 * Scores::size, 0.f);
  const ConstBatchView<Scores, float> v(x.data(), 2);
  std::vector<std::int32_t> labels(2 * 15, 1);
  labels[15 + 7] = 4; // sample 1, pixel (1, 2)
  PixelCrossEntropyLoss<float> ce;
  CHECK_THROWS_WITH_AS(ce.forward(v, labels),
                       "PixelCrossEntropyLoss: label of sample 1 at pixel (1, 2) is 4, expected a class in [0, 4) or "
                       "the ignore_index -100",
                       ValueError);
  CHECK_THROWS_WITH_AS(ce.forward(v, std::vector<std::int32_t>(29, 0)),
                       "PixelCrossEntropyLoss: expected 30 labels (2 samples of 15 pixels), found 29", ShapeError);
  PixelCrossEntropyLoss<float> weighted({.class_weights = {1.f, 1.f}});
  CHECK_THROWS_AS(weighted.forward(v, std::vector<std::int32_t>(30, 0)), ShapeError);
  CHECK_THROWS_AS(PixelCrossEntropyLoss<float>({.label_smoothing = 1.5}), ValueError);
  // Every pixel ignored: loss 0 and a zero gradient (torch's NaN would poison a step).
  PixelCrossEntropyLoss<float> all;
  CHECK(all.forward(v, std::vector<std::int32_t>(30, -100)) == 0.0);
  const ConstBatchView<Scores, float> g = all.backward();
  for (float d : g.span()) CHECK(d == 0.f);
}
