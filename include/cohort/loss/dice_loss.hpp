#pragma once
/// \file
/// The soft Dice loss of segmentation, on (N, C, H, W) scores and (N, H, W) class maps: the
/// overlap measure itself as the objective, insensitive to how rare a class's pixels are.
/// Example (compiled: tests/docs/headers.cpp, "loss/dice_loss"):
///
///     cohort::DiceLoss dice({.smooth = 1.0, .ignore_index = 255});
///     double l = dice.forward(net.forward(x), masks);            // masks: N * H * W class indices
///     net.backward(dice.backward());
///
/// The definition (the common multi-class soft Dice; torch has none built in): with p = softmax
/// over the classes of each pixel and g the one-hot label, summed over every pixel of the batch
/// that is not ignored,
///
///     D_c  = (2 sum p_c g_c + smooth) / (sum p_c + sum g_c + smooth)
///     loss = 1 - (1 / C) sum_c D_c
///
/// smooth (> 0, default 1) keeps a class absent from both prediction and labels at D_c = 1 and
/// the gradient finite. Sums run in double, pixels in order (the same for any thread count).
/// Host-memory backends (the CPU).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/loss/loss.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// DiceLoss's options.
struct DiceOptions {
  /// Added to numerator and denominator of every class's Dice coefficient (> 0).
  double smooth = 1.0;
  /// Pixels with this label count in no sum and get a zero gradient (torch's default, -100).
  std::int32_t ignore_index = -100;
};

/// `DiceLoss<T = float>`: 1 - the mean over classes of the soft Dice coefficient.
template <class T = float>
class DiceLoss {
 public:
  DiceLoss() = default;
  /// Throws ValueError for a smooth that is not positive and finite.
  explicit DiceLoss(DiceOptions o) : o_(o) {
    if (!(o_.smooth > 0) || !std::isfinite(o_.smooth))
      throw ValueError(detail::concat("DiceLoss: smooth is ", o_.smooth, ", expected a finite value > 0"));
  }
  const DiceOptions& options() const noexcept { return o_; }

  /// The loss of (N, C, H, W) scores against N * H * W labels; also computes the gradient, times
  /// `grad_scale`. Throws ShapeError for a label count other than N * H * W, ValueError for a
  /// label that is neither a class nor ignore_index (naming sample, pixel and value), first.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> scores, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    static_assert(S::rank == 3, "DiceLoss: takes (N, C, H, W) scores, one score per class and pixel");
    constexpr std::size_t classes = S::extents[0], plane = S::extents[1] * S::extents[2];
    const std::size_t batch = scores.batch();
    detail::check_pixel_labels("DiceLoss", labels, batch, classes, S::extents[2], plane, o_.ignore_index);
    grad_.resize(batch * S::size);
    batch_ = batch;
    features_ = S::size;
    const T* x = scores.data();
    T* g = grad_.data();

    // Pass 1: the softmax of every counted pixel, and the three sums per class.
    prob_.assign(batch * S::size, 0.0);
    std::vector<double> overlap(classes, 0.0), predicted(classes, 0.0), labelled(classes, 0.0);
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const std::int32_t y = labels[n * plane + p];
        if (y == o_.ignore_index) continue;
        const T* xs = x + n * S::size + p;
        double* ps = prob_.data() + n * S::size + p;
        double m = double(accumulator_t<T>(xs[0]));
        for (std::size_t c = 1; c < classes; ++c) m = std::max(m, double(accumulator_t<T>(xs[c * plane])));
        double s = 0;
        for (std::size_t c = 0; c < classes; ++c)
          s += ps[c * plane] = std::exp(double(accumulator_t<T>(xs[c * plane])) - m);
        for (std::size_t c = 0; c < classes; ++c) {
          ps[c * plane] /= s;
          predicted[c] += ps[c * plane];
        }
        overlap[std::size_t(y)] += ps[std::size_t(y) * plane];
        labelled[std::size_t(y)] += 1;
      }
    // D_c = (2 I_c + s) / den_c; dL/dp_c = -(2 g_c - D_c) / (C den_c).
    std::vector<double> dice(classes), den(classes);
    double mean_dice = 0;
    for (std::size_t c = 0; c < classes; ++c) {
      den[c] = predicted[c] + labelled[c] + o_.smooth;
      dice[c] = (2 * overlap[c] + o_.smooth) / den[c];
      mean_dice += dice[c];
    }
    mean_dice /= double(classes);

    // Pass 2: through the softmax, dL/dx_k = p_k (dL/dp_k - sum_c p_c dL/dp_c).
    std::vector<double> dp(classes);
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t p = 0; p < plane; ++p) {
        const std::int32_t y = labels[n * plane + p];
        T* gs = g + n * S::size + p;
        if (y == o_.ignore_index) {
          for (std::size_t c = 0; c < classes; ++c) gs[c * plane] = T(0);
          continue;
        }
        const double* ps = prob_.data() + n * S::size + p;
        double dot = 0;
        for (std::size_t c = 0; c < classes; ++c) {
          dp[c] = -((c == std::size_t(y) ? 2.0 : 0.0) - dice[c]) / (double(classes) * den[c]);
          dot += ps[c * plane] * dp[c];
        }
        for (std::size_t c = 0; c < classes; ++c)
          gs[c * plane] = T(accumulator_t<T>(grad_scale * ps[c * plane] * (dp[c] - dot)));
      }
    return 1 - mean_dice;
  }
  template <ShapeType S>
  double forward(BatchView<S, T> scores, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    return forward(ConstBatchView<S, T>(scores), labels, grad_scale);
  }

  /// d loss / d scores of the last forward.
  LossGradient<T> backward() const noexcept { return {grad_.data(), batch_, features_}; }

 private:
  DiceOptions o_;
  std::vector<double> prob_;
  HostBuffer<T> grad_;
  std::size_t batch_ = 0, features_ = 0;
};

} // namespace cohort
