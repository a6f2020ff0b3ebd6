#pragma once
/// \file
/// Adadelta (torch.optim.Adadelta): the optimiser of seed 000 (lr 0.5).
/// Example (compiled: tests/docs/headers.cpp, "optim/adadelta"):
///
///     cohort::Adadelta opt({.lr = 0.5});

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

/// Adadelta hyperparameters, with torch.optim.Adadelta's defaults.
struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0.0;
};

/// The update of one element (PyTorch's _single_tensor_adadelta, same operation order).
template <class T>
struct AdadeltaRule {
  T lr, rho, one_minus_rho, eps, weight_decay;
  /// Gradient clipping's factor (StepSettings::max_grad_norm), 1 without.
  T grad_scale = T(1);

  /// V is the element type or a vector of them.
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& square_avg, V& acc_delta) const {
    V g = grad; // a copy: clipping and weight decay change it
    if (grad_scale != T(1)) g = g * grad_scale;
    if (weight_decay != T(0)) g = g + weight_decay * p;
    square_avg = square_avg * rho + one_minus_rho * g * g;
    const V std_ = cpu::vsqrt(square_avg + eps);
    const V delta = cpu::vsqrt(acc_delta + eps) / std_ * g;
    acc_delta = acc_delta * rho + one_minus_rho * delta * delta;
    p = p + (-lr) * delta;
  }
};

/// `Adadelta<T = float, Backend = Cpu>`: Adadelta on a flat array of parameters (on `Backend`'s
/// memory).
template <class T = float, class Backend = Cpu>
class Adadelta : public detail::OptimizerBase<Adadelta<T, Backend>, Backend> {
 public:
  using detail::OptimizerBase<Adadelta<T, Backend>, Backend>::step;
  /// Written into checkpoints; a checkpoint only resumes into the same optimiser.
  static constexpr std::string_view name = "Adadelta";
  using options_type = AdadeltaOptions;
  /// The same optimiser on another backend (a device engine's working copy).
  template <class B>
  using rebind_backend = Adadelta<T, B>;

  explicit Adadelta(AdadeltaOptions o = {}) : opt_(o) {
    detail::require(o.lr >= 0, "Adadelta", "lr", o.lr, ">= 0");
    detail::require(o.rho >= 0 && o.rho <= 1, "Adadelta", "rho", o.rho, "in [0, 1]");
    detail::require(o.eps >= 0, "Adadelta", "eps", o.eps, ">= 0");
    detail::require(o.weight_decay >= 0, "Adadelta", "weight_decay", o.weight_decay, ">= 0");
  }

  void step(std::span<T> params, std::span<const T> grads) {
    detail::check_sizes("Adadelta", params.size(), grads.size(), square_avg_.size());
    ensure_state(params.size());
    const T clip = this->clip_coefficient(std::span<const T>(grads));
    this->for_each_group(
        params.size(), opt_.weight_decay, [&](std::size_t at, std::size_t n, double lr_scale, double wd) {
          const AdadeltaRule<T> rule{T(opt_.lr * lr_scale), T(opt_.rho), T(1 - opt_.rho), T(opt_.eps), T(wd), clip};
          ops::ElementwiseKernels<Backend>::apply_rule(this->context(), rule, n, params.data() + at, grads.data() + at,
                                                       square_avg_.data() + at, acc_delta_.data() + at);
        });
    ++this->steps_;
  }

  const AdadeltaOptions& options() const noexcept { return opt_; }
  /// The learning rate of the next steps (a schedule's: LrSchedule::lr); state is untouched.
  void set_lr(double lr) {
    detail::require(lr >= 0, "Adadelta", "lr", lr, ">= 0");
    opt_.lr = lr;
  }
  double lr() const noexcept { return opt_.lr; }
  std::vector<OptimizerSlot<T>> slots(std::size_t params = 0) {
    if (params) ensure_state(params);
    return {{"square_avg", detail::state_span(square_avg_)}, {"acc_delta", detail::state_span(acc_delta_)}};
  }

 private:
  void ensure_state(std::size_t n) {
    if (square_avg_.size() == n) return;
    square_avg_.resize(n);
    acc_delta_.resize(n);
  }

  AdadeltaOptions opt_;
  typename Backend::template buffer<T> square_avg_, acc_delta_;
};

Adadelta(AdadeltaOptions)->Adadelta<float>;

} // namespace cohort
