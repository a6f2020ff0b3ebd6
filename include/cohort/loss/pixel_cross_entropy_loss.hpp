#pragma once
/// \file
/// Cross-entropy per pixel, torch.nn.CrossEntropyLoss on (N, C, H, W) scores and (N, H, W) class
/// maps (mean reduction), with ignore_index, class weights and label smoothing as torch defines
/// them (loss/cross_entropy_options.hpp's formula, summed over the pixels that are not ignored).
/// Example (compiled: tests/docs/headers.cpp, "loss/pixel_cross_entropy_loss"):
///
///     cohort::PixelCrossEntropyLoss ce({.ignore_index = 255});   // e.g. VOC's border label
///     double l = ce.forward(net.forward(x), masks);             // masks: N * H * W class indices
///     net.backward(ce.backward());
///
/// The mean is over the pixels whose label is not ignore_index (weighted: divided by the sum of
/// their classes' weights). A batch whose every pixel is ignored has loss 0 and a zero gradient
/// (torch returns NaN there, which would poison the weights). Scores are read in any storage
/// type and reduced in double. `PixelCrossEntropyLoss<T, Backend>` on a device backend
/// (ThrustDevice, Cuda) reads scores and writes the gradient in device memory with the same
/// formulas (backend/device/softmax.hpp); labels stay in host memory, where they are checked and
/// counted first, as on the CPU.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/loss/cross_entropy_options.hpp"
#include "cohort/loss/loss.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// PixelCrossEntropyLoss's options: torch.nn.CrossEntropyLoss's ignore_index, label_smoothing
/// and weight.
struct PixelCrossEntropyOptions {
  /// Pixels with this label add nothing to the loss or its gradient (torch's default, -100).
  std::int32_t ignore_index = -100;
  double label_smoothing = 0;
  std::vector<float> class_weights{}; // empty: every class weighs 1
};

/// `PixelCrossEntropyLoss<T = float, Backend = Cpu>`: the mean over pixels of
/// -log softmax(x[n, :, h, w])[y[n, h, w]], with torch's ignore_index, weights and smoothing.
template <class T = float, class Backend = Cpu>
class PixelCrossEntropyLoss {
 public:
  PixelCrossEntropyLoss() = default;
  /// Throws ValueError for a smoothing outside [0, 1] or a negative or non-finite weight; the
  /// weight count is checked against the scores' classes at forward.
  explicit PixelCrossEntropyLoss(PixelCrossEntropyOptions o) : o_(std::move(o)) {
    detail::check_cross_entropy_options("PixelCrossEntropyLoss", as_options());
  }
  const PixelCrossEntropyOptions& options() const noexcept { return o_; }

  /// The loss of (N, C, H, W) scores against N * H * W labels (sample-major, then row-major);
  /// also computes the gradient, times `grad_scale`. Throws ShapeError for a label count other
  /// than N * H * W or a weight count other than C, ValueError for a label that is neither a class
  /// nor ignore_index (naming the sample, the pixel and the value) - before anything is computed.
  ///
  /// `denominator` > 0 replaces the batch's own (the weight total of its counted pixels): a shard
  /// of a larger batch passes the whole batch's (weight_total of the summed class_counts), so
  /// that the shards' losses and gradients add up to the whole batch's (the Trainer's replicas,
  /// chunks and ranks).
  template <ShapeType S>
  double forward(ConstBatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0,
                 double denominator = 0) {
    static_assert(S::rank == 3, "PixelCrossEntropyLoss: takes (N, C, H, W) scores, one score per class and pixel");
    constexpr std::size_t classes = S::extents[0], plane = S::extents[1] * S::extents[2];
    const std::size_t batch = logits.batch();
    check(labels, batch, classes, S::extents[2], plane);
    grad_.resize(batch * S::size);
    batch_ = batch;
    features_ = S::size;
    const bool weighted = !o_.class_weights.empty();
    const auto weight = [&](std::size_t c) { return weighted ? double(o_.class_weights[c]) : 1.0; };
    double weight_sum = 0; // sum_c w[c]
    for (std::size_t c = 0; c < classes; ++c) weight_sum += weight(c);

    // Pass 1: the denominator (the counted pixels' weight total), from integer class counts:
    // the same bits as a larger batch's total summed from its shards' counts.
    if (!(denominator > 0)) {
      std::vector<double> counts(classes, 0.0);
      count_classes(labels, counts);
      denominator = weight_total(counts);
    }
    denominator_ = denominator;
    if constexpr (!host_memory_backend<Backend>) {
      // Every pixel ignored (or weighted 0): nothing to learn from, a zero gradient and loss 0.
      const double l = ops::SoftmaxKernels<Backend>::pixel_cross_entropy(
          ctx_, logits.data(), labels.data(), batch, classes, plane, o_.ignore_index, grad_.data(),
          denominator == 0 ? 0.0 : grad_scale,
          {.smoothing = o_.label_smoothing,
           .weights = weighted ? o_.class_weights.data() : nullptr,
           .weight_sum = weight_sum,
           .denominator = denominator == 0 ? 1.0 : denominator});
      return denominator == 0 ? 0.0 : l;
    } else {
      return forward_on_host<S>(logits, labels, grad_scale, denominator, weight_sum);
    }
  }
  template <ShapeType S>
  double forward(BatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0,
                 double denominator = 0) {
    return forward(ConstBatchView<S, T>(logits), labels, grad_scale, denominator);
  }

  /// d loss / d scores of the last forward (in the backend's memory).
  LossGradient<T> backward() const noexcept { return {grad_.data(), batch_, features_}; }
  /// The threads (CPU) or device and stream (device backends) the loss runs on.
  void set_context(const typename Backend::context& ctx) noexcept { ctx_ = ctx; }
  /// What the last forward divided by: its counted pixels' weight total (or the denominator it
  /// was given); 0 when every pixel was ignored.
  double denominator() const noexcept { return denominator_; }
  std::int32_t ignore_index() const noexcept { return o_.ignore_index; }

  /// Adds each class's count of pixels in `labels` to counts[class] (ignored pixels are not
  /// counted). ValueError for a label that is neither a class in [0, counts.size()) nor
  /// ignore_index.
  void count_classes(std::span<const std::int32_t> labels, std::span<double> counts) const {
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::int32_t y = labels[i];
      if (y == o_.ignore_index) continue;
      if (y < 0 || std::size_t(y) >= counts.size())
        throw ValueError(detail::concat("PixelCrossEntropyLoss: label ", i, " is ", y, ", expected a class in [0, ",
                                        counts.size(), ") or the ignore_index ", o_.ignore_index));
      counts[std::size_t(y)] += 1;
    }
  }
  /// The weight total of pixels with these class counts, in class order (counts are integers:
  /// exact when summed over shards, so every split of a batch gets the same bits).
  double weight_total(std::span<const double> counts) const { return detail::weight_total(o_.class_weights, counts); }

 private:
  /// The CPU's loop over the pixels, reduced in double.
  template <ShapeType S>
  double forward_on_host(ConstBatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale,
                         double denominator, double weight_sum) {
    constexpr std::size_t classes = S::extents[0], plane = S::extents[1] * S::extents[2];
    const std::size_t batch = logits.batch();
    const bool weighted = !o_.class_weights.empty();
    const auto weight = [&](std::size_t c) { return weighted ? double(o_.class_weights[c]) : 1.0; };
    const T* x = logits.data();
    T* g = grad_.data();
    if (denominator == 0) { // every pixel ignored (or weighted 0): nothing to learn from
      std::fill(g, g + batch * S::size, T(0));
      return 0;
    }
    const double eps = o_.label_smoothing, scale = grad_scale / denominator;
    double nll = 0, smooth = 0;
    std::vector<double> logp(classes), e(classes);
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const T* xs = x + n * S::size + p;
        T* gs = g + n * S::size + p;
        const std::int32_t y = labels[n * plane + p];
        if (y == o_.ignore_index) {
          for (std::size_t c = 0; c < classes; ++c) gs[c * plane] = T(0);
          continue;
        }
        double m = double(accumulator_t<T>(xs[0]));
        for (std::size_t c = 1; c < classes; ++c) m = std::max(m, double(accumulator_t<T>(xs[c * plane])));
        double s = 0;
        for (std::size_t c = 0; c < classes; ++c) s += e[c] = std::exp(double(accumulator_t<T>(xs[c * plane])) - m);
        const double lse = m + std::log(s), inv_s = 1 / s;
        double pixel_smooth = 0;
        for (std::size_t c = 0; c < classes; ++c) {
          logp[c] = double(accumulator_t<T>(xs[c * plane])) - lse;
          pixel_smooth -= weight(c) * logp[c];
        }
        const double wy = weight(std::size_t(y));
        nll -= wy * logp[std::size_t(y)];
        smooth += pixel_smooth;
        // d/dx_c: (1 - eps) w_y (p_c - [c = y]) + (eps / C) (sum_c' w_c' p_c - w_c), over the denominator.
        for (std::size_t c = 0; c < classes; ++c) {
          const double prob = e[c] * inv_s; // exp(logp[c]) without a second exp (within 2 ulp of it)
          const double d = (1 - eps) * wy * (prob - (c == std::size_t(y) ? 1.0 : 0.0)) +
                           eps / double(classes) * (weight_sum * prob - weight(c));
          gs[c * plane] = T(accumulator_t<T>(d * scale));
        }
      }
    return ((1 - eps) * nll + eps / double(classes) * smooth) / denominator;
  }

  CrossEntropyOptions as_options() const {
    return {.label_smoothing = o_.label_smoothing, .class_weights = o_.class_weights};
  }

  void check(std::span<const std::int32_t> labels, std::size_t batch, std::size_t classes, std::size_t width,
             std::size_t plane) const {
    detail::check_pixel_labels("PixelCrossEntropyLoss", labels, batch, classes, width, plane, o_.ignore_index);
    detail::check_class_weight_count("PixelCrossEntropyLoss", as_options(), classes);
  }

  PixelCrossEntropyOptions o_;
  typename Backend::template buffer<T> grad_;
  typename Backend::context ctx_{};
  std::size_t batch_ = 0, features_ = 0;
  double denominator_ = 0;
};

} // namespace cohort
