#pragma once
/// \file
/// Negative log-likelihood on log-probabilities (torch.nn.NLLLoss, mean reduction).
/// Example (compiled: tests/docs/headers.cpp, "loss/nll_loss"):
///
///     cohort::NllLoss nll;
///     double l = nll.forward(net.forward(x), labels);   // after a LogSoftmax layer
///     net.backward(nll.backward());

#include <cstddef>
#include <cstdint>
#include <span>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/loss/loss.hpp"

namespace cohort {

/// `NllLoss<T = float, Backend = Cpu>`: loss = -mean_n logp[n, label[n]].
template <class T = float, class Backend = Cpu>
class NllLoss : public detail::ClassificationLoss<T, Backend> {
 public:
  /// The mean loss; also computes the gradient for backward(), multiplied by `grad_scale`
  /// (loss scaling). Throws on a label count or value that does not fit.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> logp, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    static_assert(S::rank == 1, "NllLoss: takes (N, classes) log-probabilities");
    this->prepare("NllLoss", labels, logp.batch(), S::size);
    return ops::SoftmaxKernels<Backend>::nll(this->ctx_, logp.data(), labels.data(), logp.batch(), S::size,
                                             this->grad_.data(), grad_scale);
  }
  template <ShapeType S>
  double forward(BatchView<S, T> logp, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    return forward(ConstBatchView<S, T>(logp), labels, grad_scale);
  }
};

} // namespace cohort
