#pragma once
/// \file
/// What the element-wise losses share (regression_loss.hpp, bce_with_logits_loss.hpp): one
/// target per input element, checked before anything is computed; the mean over elements of
/// `Rule::value(x, t, channel)`, reduced in double in element order (the same for any thread
/// count or batch split into the same order); the gradient `Rule::derivative(...)` over the
/// element count, stored in the input's type.

#include <cmath>
#include <cstddef>
#include <span>

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/loss/loss.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort::detail {

/// Throws ShapeError unless there are batch * size targets, ValueError for a target that is not
/// finite (naming the sample and its element index) or that `in_range` rejects (`range` then
/// says what was expected).
template <class InRange>
void check_elementwise_targets(const char* who, std::span<const float> targets, std::size_t batch, std::size_t size,
                               InRange in_range, const char* range) {
  if (targets.size() != batch * size)
    throw ShapeError(concat(who, ": expected ", batch * size, " targets (", batch, " samples of ", size,
                            " elements, one per input element), found ", targets.size()));
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (!std::isfinite(targets[i]) || !in_range(targets[i]))
      throw ValueError(concat(who, ": target of sample ", i / size, " at element ", i % size, " is ", targets[i],
                              ", expected ", range));
}

/// The loss object: `Rule` has `static constexpr const char* name`, `value(x, t, channel)` and
/// `derivative(x, t, channel)` (doubles), and `bool accepts(float target)` with `range`.
template <class T, class Rule>
class ElementwiseLoss {
 public:
  ElementwiseLoss() = default;
  explicit ElementwiseLoss(Rule rule) : rule_(std::move(rule)) {}

  /// The mean loss of `input` against one target per element (sample-major, then the sample's
  /// elements in order); also computes the gradient, times `grad_scale`. Throws ShapeError or
  /// ValueError (rule_.check) before anything is computed.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> input, std::span<const float> targets, double grad_scale = 1.0) {
    const std::size_t batch = input.batch();
    check_elementwise_targets(
        Rule::name, targets, batch, S::size, [this](float t) { return rule_.accepts(t); }, Rule::range);
    rule_.template check<S>();
    constexpr std::size_t plane = S::size / S::extents[0]; // elements per channel
    grad_.resize(batch * S::size);
    batch_ = batch;
    features_ = S::size;
    const double n = double(batch * S::size), scale = n > 0 ? grad_scale / n : 0;
    const T* x = input.data();
    T* g = grad_.data();
    double sum = 0;
    for (std::size_t i = 0; i < batch * S::size; ++i) {
      const std::size_t channel = i % S::size / plane;
      const double xi = double(accumulator_t<T>(x[i])), ti = double(targets[i]);
      sum += rule_.value(xi, ti, channel);
      g[i] = T(accumulator_t<T>(rule_.derivative(xi, ti, channel) * scale));
    }
    return n > 0 ? sum / n : 0;
  }
  template <ShapeType S>
  double forward(BatchView<S, T> input, std::span<const float> targets, double grad_scale = 1.0) {
    return forward(ConstBatchView<S, T>(input), targets, grad_scale);
  }

  /// d loss / d input of the last forward.
  LossGradient<T> backward() const noexcept { return {grad_.data(), batch_, features_}; }
  const Rule& rule() const noexcept { return rule_; }

 private:
  Rule rule_{};
  HostBuffer<T> grad_;
  std::size_t batch_ = 0, features_ = 0;
};

/// A rule without options to check against the input shape.
struct NoShapeCheck {
  template <class S>
  void check() const noexcept {}
};

} // namespace cohort::detail
