#pragma once
/// \file
/// Cross-entropy on raw scores (torch.nn.CrossEntropyLoss, mean reduction): log-softmax and NLL
/// fused, numerically stable for any logit magnitude.
/// Example (compiled: tests/docs/headers.cpp, "loss/cross_entropy_loss"):
///
///     cohort::CrossEntropyLoss ce;                     // or ce({.label_smoothing = 0.1, .class_weights = w})
///     double l = ce.forward(net.forward(x), labels);
///     net.backward(ce.backward());
///
/// Label smoothing and class weights follow torch's exact definition (loss/cross_entropy_options.hpp).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/loss/cross_entropy_options.hpp"
#include "cohort/loss/loss.hpp"

namespace cohort {

/// `CrossEntropyLoss<T = float, Backend = Cpu>`: loss = -mean_n log softmax(x_n)[label[n]], or with
/// CrossEntropyOptions torch's smoothed and weighted mean.
template <class T = float, class Backend = Cpu>
class CrossEntropyLoss : public detail::ClassificationLoss<T, Backend> {
 public:
  CrossEntropyLoss() = default;
  /// Throws ValueError for a smoothing outside [0, 1] or a negative or non-finite weight; the
  /// weight count is checked against the scores' classes at forward.
  explicit CrossEntropyLoss(CrossEntropyOptions o) : o_(std::move(o)) {
    detail::check_cross_entropy_options("CrossEntropyLoss", o_);
  }

  const CrossEntropyOptions& options() const noexcept { return o_; }
  /// Whether the mean is normalised by a weight total (class weights) rather than the count.
  bool weighted() const noexcept { return !o_.class_weights.empty(); }

  /// The mean loss; also computes the gradient (softmax - onehot) / N, times `grad_scale`. With
  /// options, torch's smoothed and weighted mean, normalised by the batch's weight total
  /// sum_n w[y_n], or by `denominator` when it is positive: a shard of a larger batch passes the
  /// larger batch's total (engines), and the shards' losses and gradients add up to the whole's.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0,
                 double denominator = 0) {
    static_assert(S::rank == 1, "CrossEntropyLoss: takes (N, classes) scores");
    this->prepare("CrossEntropyLoss", labels, logits.batch(), S::size);
    logp_.resize(logits.size());
    using K = ops::SoftmaxKernels<Backend>;
    if (o_.plain() && denominator <= 0)
      return K::cross_entropy(this->ctx_, logits.data(), labels.data(), logits.batch(), S::size, logp_.data(),
                              this->grad_.data(), grad_scale);
    detail::check_class_weight_count("CrossEntropyLoss", o_, S::size);
    const ops::CrossEntropyTerms t{.smoothing = o_.label_smoothing,
                                   .weights = weighted() ? o_.class_weights.data() : nullptr,
                                   .weight_sum = class_weight_sum(S::size),
                                   .denominator = denominator > 0 ? denominator : weight_total(labels, S::size)};
    return K::cross_entropy(this->ctx_, logits.data(), labels.data(), logits.batch(), S::size, logp_.data(),
                            this->grad_.data(), grad_scale, t);
  }
  template <ShapeType S>
  double forward(BatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0,
                 double denominator = 0) {
    return forward(ConstBatchView<S, T>(logits), labels, grad_scale, denominator);
  }

  /// sum_n w[y_n] over `labels` (their count without weights), the same bits however they are
  /// ordered; throws ValueError for a label outside [0, classes) or a total that is not
  /// positive, ShapeError for a weight count other than `classes`.
  double weight_total(std::span<const std::int32_t> labels, std::size_t classes) const {
    if (!weighted()) return double(labels.size());
    detail::check_class_weight_count("CrossEntropyLoss", o_, classes);
    detail::check_labels("CrossEntropyLoss", labels, labels.size(), classes);
    std::vector<double> counts(classes, 0.0);
    detail::count_classes(labels, counts);
    const double total = detail::weight_total(o_.class_weights, counts);
    detail::check_weight_total("CrossEntropyLoss", total, labels.size());
    return total;
  }

 private:
  /// sum_c w[c] (C without weights), summed in double.
  double class_weight_sum(std::size_t classes) const {
    if (!weighted()) return double(classes);
    double sum = 0;
    for (const float w : o_.class_weights) sum += double(w);
    return sum;
  }

  CrossEntropyOptions o_;
  typename Backend::template buffer<accumulator_t<T>> logp_; // log-probabilities of the last forward
};

} // namespace cohort
