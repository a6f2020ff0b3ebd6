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
#include "cohort/loss/loss.hpp"

namespace cohort {

/// `CrossEntropyLoss<T = float, Backend = Cpu>`: loss = -mean_n log softmax(x_n)[label[n]].
template <class T = float, class Backend = Cpu>
class CrossEntropyLoss {
 public:
  /// The mean loss; also computes the gradient (softmax - onehot) / N, times `grad_scale`.
  template <ShapeType S>
  double forward(ConstBatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    static_assert(S::rank == 1, "CrossEntropyLoss: takes (N, classes) scores");
    detail::check_labels("CrossEntropyLoss", labels, logits.batch(), S::size);
    grad_.resize(logits.size());
    logp_.resize(logits.size());
    batch_ = logits.batch();
    features_ = S::size;
    return ops::SoftmaxKernels<Backend>::cross_entropy(ctx_, logits.data(), labels.data(), logits.batch(), S::size,
                                                       logp_.data(), grad_.data(), grad_scale);
  }
  template <ShapeType S>
  double forward(BatchView<S, T> logits, std::span<const std::int32_t> labels, double grad_scale = 1.0) {
    return forward(ConstBatchView<S, T>(logits), labels, grad_scale);
  }
  /// d loss / d logits of the last forward.
  LossGradient<T> backward() const noexcept { return {grad_.data(), batch_, features_}; }

 private:
  typename Backend::template buffer<T> grad_, logp_;
  typename Backend::context ctx_{};
  std::size_t batch_ = 0, features_ = 0;
};

} // namespace cohort
