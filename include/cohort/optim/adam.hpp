#pragma once
/// \file
/// Adam, optionally AMSGrad, with L2 weight decay (torch.optim.Adam).
///
///     cohort::Adam opt({.lr = 1e-3, .eps = 1e-7});   // seed 003's settings

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cohort/backend/cpu/elementwise.hpp"
#include "cohort/core/macros.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Adam hyperparameters, with torch.optim.Adam's defaults.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
};

/// The update of one element at one step (PyTorch's _single_tensor_adam, same operation order;
/// the bias corrections are computed in double once per step, as Python does).
template <class T>
struct AdamRule {
  T weight_decay, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;
  bool amsgrad;

  /// Adam. V is the element type or a vector of them.
  template <class V>
  COHORT_RULE void operator()(V& p, V g, V& m, V& v) const {
    moments(p, g, m, v);
    // param.addcdiv_(exp_avg, denom, value=-step_size), denom = sqrt(v) / bc2_sqrt + eps
    p = p + neg_step_size * m / (cpu::vsqrt(v) / bias_correction2_sqrt + eps);
  }
  /// AMSGrad: normalise by the largest second moment seen.
  template <class V>
  COHORT_RULE void operator()(V& p, V g, V& m, V& v, V& vmax) const {
    moments(p, g, m, v);
    vmax = vmax > v ? vmax : v;
    p = p + neg_step_size * m / (cpu::vsqrt(vmax) / bias_correction2_sqrt + eps);
  }

 private:
  template <class V>
  COHORT_RULE void moments(V& p, V& g, V& m, V& v) const {
    if (weight_decay != T(0)) g = g + weight_decay * p;
    // exp_avg.lerp_(grad, 1 - beta1)
    const T w = one_minus_beta1;
    m = (w < T(0.5)) ? m + w * (g - m) : g - (g - m) * (T(1) - w);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v = v * beta2 + one_minus_beta2 * g * g;
  }
};

/// `Adam<T = float, Backend = Cpu>`: Adam on a flat array of parameters (on `Backend`'s memory).
template <class T = float, class Backend = Cpu>
class Adam : public detail::OptimizerBase<Adam<T, Backend>, Backend> {
 public:
  using detail::OptimizerBase<Adam<T, Backend>, Backend>::step;
  /// Written into checkpoints; a checkpoint only resumes into the same optimiser.
  static constexpr std::string_view name = "Adam";
  using options_type = AdamOptions;
  /// The same optimiser on another backend (a device engine's working copy).
  template <class B>
  using rebind_backend = Adam<T, B>;

  explicit Adam(AdamOptions o = {}) : opt_(o) {
    detail::require(o.lr >= 0, "Adam", "lr", o.lr, ">= 0");
    detail::require(o.eps >= 0, "Adam", "eps", o.eps, ">= 0");
    detail::require(o.beta1 >= 0 && o.beta1 < 1, "Adam", "beta1", o.beta1, "in [0, 1)");
    detail::require(o.beta2 >= 0 && o.beta2 < 1, "Adam", "beta2", o.beta2, "in [0, 1)");
    detail::require(o.weight_decay >= 0, "Adam", "weight_decay", o.weight_decay, ">= 0");
  }

  void step(std::span<T> params, std::span<const T> grads) {
    detail::check_sizes("Adam", params.size(), grads.size(), exp_avg_.size());
    ensure_state(params.size());
    ++this->steps_;
    const double s = double(this->steps_);
    const double bc1 = 1 - std::pow(opt_.beta1, s);
    const double bc2 = 1 - std::pow(opt_.beta2, s);
    const AdamRule<T> rule{T(opt_.weight_decay), T(1 - opt_.beta1), T(opt_.beta2),       T(1 - opt_.beta2),
                           T(std::sqrt(bc2)),    T(opt_.eps),       T(-(opt_.lr / bc1)), opt_.amsgrad};
    using K = ops::ElementwiseKernels<Backend>;
    if (opt_.amsgrad)
      K::apply_rule(this->context(), rule, params.size(), params.data(), grads.data(), exp_avg_.data(),
                    exp_avg_sq_.data(), max_exp_avg_sq_.data());
    else
      K::apply_rule(this->context(), rule, params.size(), params.data(), grads.data(), exp_avg_.data(),
                    exp_avg_sq_.data());
  }

  const AdamOptions& options() const noexcept { return opt_; }
  /// The learning rate of the next steps (a schedule's: LrSchedule::lr); state is untouched.
  void set_lr(double lr) {
    detail::require(lr >= 0, "Adam", "lr", lr, ">= 0");
    opt_.lr = lr;
  }
  double lr() const noexcept { return opt_.lr; }
  std::vector<OptimizerSlot<T>> slots(std::size_t params = 0) {
    if (params) ensure_state(params);
    std::vector<OptimizerSlot<T>> out{{"exp_avg", detail::state_span(exp_avg_)},
                                      {"exp_avg_sq", detail::state_span(exp_avg_sq_)}};
    if (opt_.amsgrad) out.push_back({"max_exp_avg_sq", detail::state_span(max_exp_avg_sq_)});
    return out;
  }

 private:
  void ensure_state(std::size_t n) {
    if (exp_avg_.size() == n) return;
    exp_avg_.resize(n);
    exp_avg_sq_.resize(n);
    if (opt_.amsgrad) max_exp_avg_sq_.resize(n);
  }

  AdamOptions opt_;
  typename Backend::template buffer<T> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};

Adam(AdamOptions)->Adam<float>;

} // namespace cohort
