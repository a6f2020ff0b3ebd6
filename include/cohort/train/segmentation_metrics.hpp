#pragma once
/// \file
/// Pixel accuracy and intersection over union for dense prediction: a confusion matrix over the
/// pixels of (N, C, H, W) scores (their argmax) against (N, H, W) class maps, pixels labelled
/// ignore_index left out.
/// Example (compiled: tests/docs/headers.cpp, "train/segmentation_metrics"):
///
///     cohort::SegmentationMetrics m(11);                 // 11 classes
///     m.add(net.forward(x), masks);                      // any number of batches
///     double miou = m.mean_iou(), acc = m.pixel_accuracy();
///
/// IoU of class c = TP / (TP + FP + FN); the mean is over the classes that occur in the labels or
/// the predictions (a class absent from both has no IoU, as torchmetrics' JaccardIndex with
/// absent classes dropped). The argmax takes the first maximum (torch.argmax's tie rule).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/loss/loss.hpp" // detail::check_pixel_labels
#include "cohort/tensor/batch.hpp"

namespace cohort {

class SegmentationMetrics {
 public:
  explicit SegmentationMetrics(std::size_t classes, std::int32_t ignore_index = -100)
      : classes_(classes), ignore_(ignore_index), confusion_(classes * classes, 0) {
    if (classes == 0) throw ValueError("SegmentationMetrics: needs at least one class");
  }

  /// Adds a batch: (N, C, H, W) scores in host memory and N * H * W labels. Throws ShapeError for
  /// C other than the classes given or a label count other than N * H * W, ValueError for a label
  /// that is neither a class nor ignore_index (naming the sample and pixel), before counting any.
  template <ShapeType S, class T>
  void add(ConstBatchView<S, T> scores, std::span<const std::int32_t> labels) {
    static_assert(S::rank == 3, "SegmentationMetrics: takes (N, C, H, W) scores");
    constexpr std::size_t c = S::extents[0], plane = S::extents[1] * S::extents[2];
    if (c != classes_)
      throw ShapeError(
          detail::concat("SegmentationMetrics: the scores have ", c, " classes, the metrics count ", classes_));
    const std::size_t batch = scores.batch();
    detail::check_pixel_labels("SegmentationMetrics", labels, batch, c, S::extents[2], plane, ignore_);
    const T* x = scores.data();
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const std::int32_t y = labels[n * plane + p];
        if (y == ignore_) continue;
        const T* xs = x + n * S::size + p;
        std::size_t best = 0;
        auto top = accumulator_t<T>(xs[0]);
        for (std::size_t k = 1; k < c; ++k)
          if (accumulator_t<T>(xs[k * plane]) > top) {
            top = accumulator_t<T>(xs[k * plane]);
            best = k;
          }
        ++confusion_[std::size_t(y) * classes_ + best];
      }
  }
  template <ShapeType S, class T>
  void add(BatchView<S, T> scores, std::span<const std::int32_t> labels) {
    add(ConstBatchView<S, T>(scores), labels);
  }

  /// Pixels counted so far whose label is `truth` and prediction `predicted`.
  std::uint64_t count(std::size_t truth, std::size_t predicted) const {
    return confusion_.at(truth * classes_ + predicted);
  }
  std::uint64_t pixels() const noexcept {
    std::uint64_t n = 0;
    for (const std::uint64_t v : confusion_) n += v;
    return n;
  }
  /// Correct pixels over counted pixels; ValueError when none were counted (not 0).
  double pixel_accuracy() const {
    const std::uint64_t n = pixels();
    if (n == 0)
      throw ValueError("SegmentationMetrics: pixel_accuracy of no pixels (every label ignored, or nothing added)");
    return double(correct()) / double(n);
  }
  /// IoU of each class; negative (-1) for a class absent from labels and predictions.
  std::vector<double> iou() const {
    std::vector<double> out(classes_, -1.0);
    for (std::size_t k = 0; k < classes_; ++k) {
      std::uint64_t fp = 0, fn = 0;
      for (std::size_t j = 0; j < classes_; ++j)
        if (j != k) {
          fn += count(k, j);
          fp += count(j, k);
        }
      const std::uint64_t uni = count(k, k) + fp + fn;
      if (uni > 0) out[k] = double(count(k, k)) / double(uni);
    }
    return out;
  }
  /// The mean IoU over the classes that occur; ValueError when no pixel was counted.
  double mean_iou() const {
    if (pixels() == 0)
      throw ValueError("SegmentationMetrics: mean_iou of no pixels (every label ignored, or nothing added)");
    double sum = 0;
    std::size_t present = 0;
    for (const double v : iou())
      if (v >= 0) {
        sum += v;
        ++present;
      }
    return sum / double(present);
  }
  /// Correct pixels counted so far (the confusion matrix's diagonal).
  std::uint64_t correct() const noexcept {
    std::uint64_t hit = 0;
    for (std::size_t k = 0; k < classes_; ++k) hit += confusion_[k * classes_ + k];
    return hit;
  }
  void reset() { std::fill(confusion_.begin(), confusion_.end(), 0); }
  std::size_t classes() const noexcept { return classes_; }
  std::int32_t ignore_index() const noexcept { return ignore_; }

  /// The counts, (truth, predicted) row-major: classes() x classes() of them.
  std::span<const std::uint64_t> confusion() const noexcept { return confusion_; }
  /// Adds counts in confusion()'s layout (another replica's or rank's). ShapeError for a count of
  /// counts other than classes() x classes().
  void add_confusion(std::span<const std::uint64_t> counts) {
    if (counts.size() != confusion_.size())
      throw ShapeError(detail::concat("SegmentationMetrics: ", counts.size(), " counts to add, expected ",
                                      confusion_.size(), " (", classes_, " x ", classes_, " classes)"));
    for (std::size_t i = 0; i < counts.size(); ++i) confusion_[i] += counts[i];
  }
  void merge(const SegmentationMetrics& other) { add_confusion(other.confusion()); }

 private:
  std::size_t classes_;
  std::int32_t ignore_;
  std::vector<std::uint64_t> confusion_; // (truth, predicted), row-major
};

} // namespace cohort
