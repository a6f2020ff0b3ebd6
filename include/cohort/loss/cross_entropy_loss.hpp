#pragma once
/// \file
/// Cross-entropy on raw scores (torch.nn.CrossEntropyLoss, mean reduction): log-softmax and NLL
/// fused, numerically stable for any logit magnitude.
///
///     cohort::CrossEntropyLoss ce;
///     double l = ce.forward(net.forward(x), labels);
///     net.backward(ce.backward());

#include <cstddef>
#include <cstdint>
#include <span>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/loss/loss.hpp"

namespace cohort {

/// `CrossEntropyLoss<T = float, Backend = Cpu>`: loss = -mean_n log softmax(x_n)[label[n]].
template <class T = float, class Backend = Cpu>
class CrossEntropyLoss : public detail::ClassificationLoss<T, Backend> {
 public:
  /// The mean loss; also computes the gradient (softmax - onehot) / N, times `grad_scale`.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    static_assert(S::rank == 1, "CrossEntropyLoss: takes (N, classes) scores");
    this->prepare("CrossEntropyLoss", labels, logits.batch(), S::size);
    logp_.resize(logits.size());
    return ops::SoftmaxKernels<Backend>::cross_entropy(this->ctx_, logits.data(), labels.data(), logits.batch(),
                                                       S::size, logp_.data(), this->grad_.data(), grad_scale);
  }
  template <ShapeType S>
  double forward(BatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    return forward(ConstBatchView<S, T>(logits), labels, grad_scale);
  }

 private:
  typename Backend::template buffer<accumulator_t<T>> logp_; // log-probabilities of the last forward
};

} // namespace cohort
