// SegmentationMetrics (train/segmentation_metrics.hpp) against numpy's confusion matrix, IoU and
// pixel accuracy on the same scores (tests/reference/make_reference.py, "metrics_segmentation").

#include <doctest/doctest.h>

#include <cohort/train/segmentation_metrics.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("SegmentationMetrics: confusion, IoU per class, mean IoU and pixel accuracy match numpy's") {
  const auto f = fixture("metrics_segmentation");
  const auto x = f.values<float>("x");
  const auto labels = f.values<std::int32_t>("labels");
  SegmentationMetrics m(4, 255);
  // In two batches of one sample: the counts add up.
  m.add(ConstBatchView<Shape<4, 3, 5>, float>(x.data(), 1), std::span(labels).first(15));
  m.add(ConstBatchView<Shape<4, 3, 5>, float>(x.data() + 60, 1), std::span(labels).subspan(15));
  const auto confusion = f.values<float>("confusion");
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t p = 0; p < 4; ++p) CHECK(double(m.count(t, p)) == double(confusion[t * 4 + p]));
  CHECK(m.pixels() == 30 - 6); // six pixels ignored
  const auto iou = m.iou();
  const auto expected = f.values<float>("iou");
  for (std::size_t k = 0; k < 4; ++k) CHECK(iou[k] == doctest::Approx(expected[k]).epsilon(1e-6));
  CHECK(m.mean_iou() == doctest::Approx(f.values<float>("mean_iou")[0]).epsilon(1e-6));
  CHECK(m.pixel_accuracy() == doctest::Approx(f.values<float>("pixel_accuracy")[0]).epsilon(1e-6));
}

TEST_CASE("SegmentationMetrics: bad input and empty counts are typed errors") {
  std::vector<float> x(2 * 3 * 4, 0.f);
  SegmentationMetrics m(3);
  CHECK_THROWS_WITH_AS(
      m.mean_iou(), "SegmentationMetrics: mean_iou of no pixels (every label ignored, or nothing added)", ValueError);
  std::vector<std::int32_t> labels(8, 0);
  labels[5] = 3; // sample 1, pixel (0, 1)
  CHECK_THROWS_WITH_AS(m.add(ConstBatchView<Shape<3, 2, 2>, float>(x.data(), 2), labels),
                       "SegmentationMetrics: label of sample 1 at pixel (0, 1) is 3, expected a class in [0, 3) or the "
                       "ignore_index -100",
                       ValueError);
  CHECK(m.pixels() == 0); // nothing counted from the bad batch
  CHECK_THROWS_AS(m.add(ConstBatchView<Shape<2, 2, 2>, float>(x.data(), 2), labels), ShapeError);
  // All scores equal: argmax is class 0 (torch's first maximum).
  labels[5] = 0;
  m.add(ConstBatchView<Shape<3, 2, 2>, float>(x.data(), 2), labels);
  CHECK(m.pixel_accuracy() == 1.0);
  CHECK(m.mean_iou() == 1.0); // only class 0 occurs
}
