#pragma once
/// \file
/// RMSprop, optionally centred and with momentum, with L2 weight decay (torch.optim.RMSprop).
/// Example (compiled: tests/docs/headers.cpp, "optim/rmsprop"):
///
///     cohort::RmsProp opt({.lr = 1e-3, .momentum = 0.9, .centered = true});

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

/// RMSprop hyperparameters, with torch.optim.RMSprop's defaults.
struct RmsPropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
};

/// The update of one element (PyTorch's _single_tensor_rmsprop, same operation order). The
/// state arguments are square_avg, then momentum_buffer when momentum > 0, then grad_avg when
/// centred: one operator per combination.
template <class T>
struct RmsPropRule {
  T lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
  /// Gradient clipping's factor (StepSettings::max_grad_norm), 1 without.
  T grad_scale = T(1);

  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& square_avg) const {
    V g = grad; // a copy: clipping and weight decay change it
    const V avg = cpu::vsqrt(average(p, g, square_avg)) + eps;
    p = p + (-lr) * g / avg; // param.addcdiv_(grad, avg, value=-lr)
  }
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& square_avg, V& buf) const {
    V g = grad; // a copy: clipping and weight decay change it
    const V avg = cpu::vsqrt(average(p, g, square_avg)) + eps;
    with_momentum(p, g, avg, buf);
  }
  /// Centred, without momentum (the last state is grad_avg).
  struct Centered {
    RmsPropRule r; // by value: device kernels copy the rule
    template <class V>
    COHORT_RULE void operator()(V& p, const V& grad, V& square_avg, V& grad_avg) const {
      V g = grad; // a copy: clipping and weight decay change it
      const V avg = r.centered_avg(p, g, square_avg, grad_avg);
      p = p + (-r.lr) * g / avg;
    }
    template <class V>
    COHORT_RULE void operator()(V& p, const V& grad, V& square_avg, V& buf, V& grad_avg) const {
      V g = grad;                                               // a copy: clipping and weight decay change it
      const V avg = r.centered_avg(p, g, square_avg, grad_avg); // clips and decays g first
      r.with_momentum(p, g, avg, buf);
    }
  };

  /// square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha), after clipping and decay.
  template <class V>
  COHORT_RULE V average(V& p, V& g, V& square_avg) const {
    if (grad_scale != T(1)) g = g * grad_scale;
    if (weight_decay != T(0)) g = g + weight_decay * p;
    square_avg = square_avg * alpha + one_minus_alpha * g * g;
    return square_avg;
  }
  /// grad_avg.lerp_(grad, 1 - alpha); avg = sqrt(square_avg - grad_avg^2) + eps.
  template <class V>
  COHORT_RULE V centered_avg(V& p, V& g, V& square_avg, V& grad_avg) const {
    average(p, g, square_avg);
    const T w = one_minus_alpha;
    grad_avg = (w < T(0.5)) ? grad_avg + w * (g - grad_avg) : g - (g - grad_avg) * (T(1) - w);
    return cpu::vsqrt(square_avg + T(-1) * grad_avg * grad_avg) + eps;
  }
  /// buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr).
  template <class V>
  COHORT_RULE void with_momentum(V& p, const V& g, const V& avg, V& buf) const {
    buf = buf * momentum + g / avg;
    p = p + (-lr) * buf;
  }
};

/// `RmsProp<T = float, Backend = Cpu>`: RMSprop on a flat array of parameters (on `Backend`'s
/// memory).
template <class T = float, class Backend = Cpu>
class RmsProp : public detail::OptimizerBase<RmsProp<T, Backend>, Backend> {
 public:
  using detail::OptimizerBase<RmsProp<T, Backend>, Backend>::step;
  /// Written into checkpoints; a checkpoint only resumes into the same optimiser.
  static constexpr std::string_view name = "RMSprop";
  using options_type = RmsPropOptions;
  template <class B>
  using rebind_backend = RmsProp<T, B>;

  explicit RmsProp(RmsPropOptions o = {}) : opt_(o) {
    detail::require(o.lr >= 0, "RMSprop", "lr", o.lr, ">= 0");
    detail::require(o.eps >= 0, "RMSprop", "eps", o.eps, ">= 0");
    detail::require(o.momentum >= 0, "RMSprop", "momentum", o.momentum, ">= 0");
    detail::require(o.weight_decay >= 0, "RMSprop", "weight_decay", o.weight_decay, ">= 0");
    detail::require(o.alpha >= 0, "RMSprop", "alpha", o.alpha, ">= 0");
  }

  void step(std::span<T> params, std::span<const T> grads) {
    detail::check_sizes("RMSprop", params.size(), grads.size(), square_avg_.size());
    ensure_state(params.size());
    const T clip = this->clip_coefficient(std::span<const T>(grads));
    this->for_each_group(
        params.size(), opt_.weight_decay, [&](std::size_t at, std::size_t n, double lr_scale, double wd) {
          const RmsPropRule<T> rule{T(opt_.lr * lr_scale), T(opt_.alpha), T(1 - opt_.alpha), T(opt_.eps), T(wd),
                                    T(opt_.momentum),      clip};
          using K = ops::ElementwiseKernels<Backend>;
          T* p = params.data() + at;
          const T* g = grads.data() + at;
          T* sq = square_avg_.data() + at;
          const bool momentum = opt_.momentum > 0;
          if (opt_.centered && momentum)
            K::apply_rule(this->context(), typename RmsPropRule<T>::Centered{rule}, n, p, g, sq, buf_.data() + at,
                          grad_avg_.data() + at);
          else if (opt_.centered)
            K::apply_rule(this->context(), typename RmsPropRule<T>::Centered{rule}, n, p, g, sq, grad_avg_.data() + at);
          else if (momentum)
            K::apply_rule(this->context(), rule, n, p, g, sq, buf_.data() + at);
          else
            K::apply_rule(this->context(), rule, n, p, g, sq);
        });
    ++this->steps_;
  }

  const RmsPropOptions& options() const noexcept { return opt_; }
  /// The learning rate of the next steps (a schedule's: LrSchedule::lr); state is untouched.
  void set_lr(double lr) {
    detail::require(lr >= 0, "RMSprop", "lr", lr, ">= 0");
    opt_.lr = lr;
  }
  double lr() const noexcept { return opt_.lr; }
  /// The momentum of the next steps (OneCycleLR's cycle_momentum: LrSchedule::momentum). Only
  /// for an RMSprop built with momentum: its buffer is state from the first step on.
  void set_momentum(double m) {
    detail::require(opt_.momentum > 0, "RMSprop", "momentum to cycle from", opt_.momentum,
                    "> 0 at construction (an RMSprop without momentum has no buffer)");
    detail::require(m > 0, "RMSprop", "momentum", m, "> 0 (with momentum at construction)");
    opt_.momentum = m;
  }
  /// torch's state names: square_avg, momentum_buffer (momentum > 0), grad_avg (centred).
  std::vector<OptimizerSlot<T>> slots(std::size_t params = 0) {
    if (params) ensure_state(params);
    std::vector<OptimizerSlot<T>> out{{"square_avg", detail::state_span(square_avg_)}};
    if (opt_.momentum > 0) out.push_back({"momentum_buffer", detail::state_span(buf_)});
    if (opt_.centered) out.push_back({"grad_avg", detail::state_span(grad_avg_)});
    return out;
  }

 private:
  void ensure_state(std::size_t n) {
    if (square_avg_.size() == n) return;
    square_avg_.resize(n);
    if (opt_.momentum > 0) buf_.resize(n);
    if (opt_.centered) grad_avg_.resize(n);
  }

  RmsPropOptions opt_;
  typename Backend::template buffer<T> square_avg_, buf_, grad_avg_;
};

RmsProp(RmsPropOptions)->RmsProp<float>;

} // namespace cohort
