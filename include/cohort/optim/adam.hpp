#pragma once
/// \file
/// Adam, optionally AMSGrad, with L2 weight decay (torch.optim.Adam), and AdamW: the same with
/// decoupled weight decay (torch.optim.AdamW: the parameter shrinks by lr * weight_decay before
/// the Adam update instead of the decay entering the gradient).
/// Example (compiled: tests/docs/headers.cpp, "optim/adam"):
///
///     cohort::Adam opt({.lr = 1e-3, .eps = 1e-7});   // seed 003's settings
///     cohort::AdamW w({.lr = 1e-3, .weight_decay = 0.05});

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

/// AdamW hyperparameters, with torch.optim.AdamW's defaults (weight decay 0.01).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

/// The update of one element at one step (PyTorch's _single_tensor_adam, same operation order;
/// the bias corrections are computed in double once per step, as Python does).
template <class T>
struct AdamRule {
  T weight_decay, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;
  bool amsgrad;
  /// Gradient clipping's factor (StepSettings::max_grad_norm), 1 without.
  T grad_scale = T(1);
  /// AdamW: param.mul_(1 - lr * weight_decay) first (then weight_decay is 0); 1 for Adam.
  T decay_factor = T(1);

  /// Adam. V is the element type or a vector of them.
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& m, V& v) const {
    V g = grad; // a copy: clipping and weight decay change it
    moments(p, g, m, v);
    // param.addcdiv_(exp_avg, denom, value=-step_size), denom = sqrt(v) / bc2_sqrt + eps
    p = p + neg_step_size * m / (cpu::vsqrt(v) / bias_correction2_sqrt + eps);
  }
  /// AMSGrad: normalise by the largest second moment seen.
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& m, V& v, V& vmax) const {
    V g = grad; // a copy: clipping and weight decay change it
    moments(p, g, m, v);
    vmax = vmax > v ? vmax : v;
    p = p + neg_step_size * m / (cpu::vsqrt(vmax) / bias_correction2_sqrt + eps);
  }

 private:
  template <class V>
  COHORT_RULE void moments(V& p, V& g, V& m, V& v) const {
    if (grad_scale != T(1)) g = g * grad_scale;
    if (decay_factor != T(1)) p = p * decay_factor;
    if (weight_decay != T(0)) g = g + weight_decay * p;
    // exp_avg.lerp_(grad, 1 - beta1)
    const T w = one_minus_beta1;
    m = (w < T(0.5)) ? m + w * (g - m) : g - (g - m) * (T(1) - w);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v = v * beta2 + one_minus_beta2 * g * g;
  }
};

namespace detail {
/// Adam and AdamW: the state, the step and the checks. Derived names itself and its options;
/// `Decoupled`: AdamW's weight decay.
template <class Derived, class Options, bool Decoupled, class T, class Backend>
class AdamFamily : public OptimizerBase<Derived, Backend> {
 public:
  using OptimizerBase<Derived, Backend>::step;
  using options_type = Options;

  explicit AdamFamily(Options o) : opt_(o) {
    const char* name = Derived::name.data();
    require(o.lr >= 0, name, "lr", o.lr, ">= 0");
    require(o.eps >= 0, name, "eps", o.eps, ">= 0");
    require(o.beta1 >= 0 && o.beta1 < 1, name, "beta1", o.beta1, "in [0, 1)");
    require(o.beta2 >= 0 && o.beta2 < 1, name, "beta2", o.beta2, "in [0, 1)");
    require(o.weight_decay >= 0, name, "weight_decay", o.weight_decay, ">= 0");
  }

  void step(std::span<T> params, std::span<const T> grads) {
    check_sizes(Derived::name.data(), params.size(), grads.size(), exp_avg_.size());
    ensure_state(params.size());
    ++this->steps_;
    const double s = double(this->steps_);
    const double bc1 = 1 - std::pow(opt_.beta1, s);
    const double bc2 = 1 - std::pow(opt_.beta2, s);
    const T clip = this->clip_coefficient(std::span<const T>(grads));
    this->for_each_group(params.size(), opt_.weight_decay,
                         [&](std::size_t at, std::size_t n, double lr_scale, double wd) {
                           const double lr = opt_.lr * lr_scale;
                           const AdamRule<T> rule{Decoupled ? T(0) : T(wd),
                                                  T(1 - opt_.beta1),
                                                  T(opt_.beta2),
                                                  T(1 - opt_.beta2),
                                                  T(std::sqrt(bc2)),
                                                  T(opt_.eps),
                                                  T(-(lr / bc1)),
                                                  opt_.amsgrad,
                                                  clip,
                                                  Decoupled ? T(1 - lr * wd) : T(1)};
                           using K = ops::ElementwiseKernels<Backend>;
                           if (opt_.amsgrad)
                             K::apply_rule(this->context(), rule, n, params.data() + at, grads.data() + at,
                                           exp_avg_.data() + at, exp_avg_sq_.data() + at, max_exp_avg_sq_.data() + at);
                           else
                             K::apply_rule(this->context(), rule, n, params.data() + at, grads.data() + at,
                                           exp_avg_.data() + at, exp_avg_sq_.data() + at);
                         });
  }

  const Options& options() const noexcept { return opt_; }
  /// The learning rate of the next steps (a schedule's: LrSchedule::lr); state is untouched.
  void set_lr(double lr) {
    require(lr >= 0, Derived::name.data(), "lr", lr, ">= 0");
    opt_.lr = lr;
  }
  double lr() const noexcept { return opt_.lr; }
  /// beta1 of the next steps: what OneCycleLR's cycle_momentum sets (torch's betas[0]); the
  /// bias correction uses the current beta1, as torch's does.
  void set_momentum(double beta1) {
    require(beta1 >= 0 && beta1 < 1, Derived::name.data(), "beta1", beta1, "in [0, 1)");
    opt_.beta1 = beta1;
  }
  std::vector<OptimizerSlot<T>> slots(std::size_t params = 0) {
    if (params) ensure_state(params);
    std::vector<OptimizerSlot<T>> out{{"exp_avg", state_span(exp_avg_)}, {"exp_avg_sq", state_span(exp_avg_sq_)}};
    if (opt_.amsgrad) out.push_back({"max_exp_avg_sq", state_span(max_exp_avg_sq_)});
    return out;
  }

 private:
  void ensure_state(std::size_t n) {
    if (exp_avg_.size() == n) return;
    exp_avg_.resize(n);
    exp_avg_sq_.resize(n);
    if (opt_.amsgrad) max_exp_avg_sq_.resize(n);
  }

  Options opt_;
  typename Backend::template buffer<T> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
};
} // namespace detail

/// `Adam<T = float, Backend = Cpu>`: Adam on a flat array of parameters (on `Backend`'s memory).
template <class T = float, class Backend = Cpu>
class Adam : public detail::AdamFamily<Adam<T, Backend>, AdamOptions, false, T, Backend> {
 public:
  /// Written into checkpoints; a checkpoint only resumes into the same optimiser.
  static constexpr std::string_view name = "Adam";
  /// The same optimiser on another backend (a device engine's working copy).
  template <class B>
  using rebind_backend = Adam<T, B>;
  explicit Adam(AdamOptions o = {}) : detail::AdamFamily<Adam, AdamOptions, false, T, Backend>(o) {}
};

/// `AdamW<T = float, Backend = Cpu>`: Adam with decoupled weight decay (torch.optim.AdamW).
template <class T = float, class Backend = Cpu>
class AdamW : public detail::AdamFamily<AdamW<T, Backend>, AdamWOptions, true, T, Backend> {
 public:
  static constexpr std::string_view name = "AdamW";
  template <class B>
  using rebind_backend = AdamW<T, B>;
  explicit AdamW(AdamWOptions o = {}) : detail::AdamFamily<AdamW, AdamWOptions, true, T, Backend>(o) {}
};

Adam(AdamOptions)->Adam<float>;
AdamW(AdamWOptions)->AdamW<float>;

} // namespace cohort
