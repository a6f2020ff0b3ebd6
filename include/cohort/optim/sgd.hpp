#pragma once
/// \file
/// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay
/// (torch.optim.SGD).
/// Example (compiled: tests/docs/headers.cpp, "optim/sgd"):
///
///     cohort::Sgd opt({.lr = 0.01, .momentum = 0.9, .nesterov = true});
///     opt.step(net);

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

/// SGD hyperparameters, with torch.optim.SGD's defaults.
struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

/// The update of one element (PyTorch's _single_tensor_sgd, same operation order). V is the
/// element type or a vector of them: the same code runs on lanes.
template <class T>
struct SgdRule {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, first_step;
  /// Gradient clipping's factor (StepSettings::max_grad_norm), 1 without.
  T grad_scale = T(1);

  /// With a momentum buffer.
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad, V& buf) const {
    V g = grad; // a copy: clipping and weight decay change it
    if (grad_scale != T(1)) g = g * grad_scale;
    if (weight_decay != T(0)) g = g + weight_decay * p;
    buf = first_step ? g : buf * momentum + one_minus_dampening * g;
    g = nesterov ? g + momentum * buf : buf;
    p = p + (-lr) * g;
  }
  /// Without momentum.
  template <class V>
  COHORT_RULE void operator()(V& p, const V& grad) const {
    V g = grad; // a copy: clipping and weight decay change it
    if (grad_scale != T(1)) g = g * grad_scale;
    if (weight_decay != T(0)) g = g + weight_decay * p;
    p = p + (-lr) * g;
  }
};

/// `Sgd<T = float, Backend = Cpu>`: SGD on a flat array of parameters (on `Backend`'s memory).
template <class T = float, class Backend = Cpu>
class Sgd : public detail::OptimizerBase<Sgd<T, Backend>, Backend> {
 public:
  using detail::OptimizerBase<Sgd<T, Backend>, Backend>::step;
  /// Written into checkpoints; a checkpoint only resumes into the same optimiser.
  static constexpr std::string_view name = "SGD";
  using options_type = SgdOptions;
  /// The same optimiser on another backend (a device engine's working copy).
  template <class B>
  using rebind_backend = Sgd<T, B>;

  explicit Sgd(SgdOptions o = {}) : opt_(o) {
    detail::require(o.lr >= 0, "SGD", "lr", o.lr, ">= 0");
    detail::require(o.momentum >= 0, "SGD", "momentum", o.momentum, ">= 0");
    detail::require(o.weight_decay >= 0, "SGD", "weight_decay", o.weight_decay, ">= 0");
    detail::require(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD", "nesterov with momentum", o.momentum,
                    "momentum > 0 and dampening == 0");
  }

  void step(std::span<T> params, std::span<const T> grads) {
    detail::check_sizes("SGD", params.size(), grads.size(), momentum_.size());
    const bool first = this->steps_ == 0;
    if (opt_.momentum != 0 && momentum_.size() == 0) momentum_.resize(params.size());
    const T clip = this->clip_coefficient(std::span<const T>(grads));
    this->for_each_group(
        params.size(), opt_.weight_decay, [&](std::size_t at, std::size_t n, double lr_scale, double wd) {
          const SgdRule<T> rule{
              T(opt_.lr * lr_scale), T(opt_.momentum), T(1 - opt_.dampening), T(wd), opt_.nesterov, first, clip};
          using K = ops::ElementwiseKernels<Backend>;
          if (opt_.momentum != 0)
            K::apply_rule(this->context(), rule, n, params.data() + at, grads.data() + at, momentum_.data() + at);
          else // PyTorch's SGD without momentum ignores dampening: the two-argument rule
            K::apply_rule(this->context(), rule, n, params.data() + at, grads.data() + at);
        });
    ++this->steps_;
  }

  const SgdOptions& options() const noexcept { return opt_; }
  /// The learning rate of the next steps (a schedule's: LrSchedule::lr); state is untouched.
  void set_lr(double lr) {
    detail::require(lr >= 0, "SGD", "lr", lr, ">= 0");
    opt_.lr = lr;
  }
  double lr() const noexcept { return opt_.lr; }
  /// The momentum of the next steps (OneCycleLR's cycle_momentum: LrSchedule::momentum). Only
  /// for an SGD built with momentum: its buffer is state from the first step on.
  void set_momentum(double m) {
    detail::require(opt_.momentum > 0, "SGD", "momentum to cycle from", opt_.momentum,
                    "> 0 at construction (an SGD without momentum has no buffer)");
    detail::require(m > 0, "SGD", "momentum", m, "> 0 (with momentum at construction)");
    opt_.momentum = m;
  }
  /// State for checkpoints: "momentum_buffer" when momentum is on. Allocates it if missing so
  /// that a checkpoint can be loaded into a fresh optimiser.
  std::vector<OptimizerSlot<T>> slots(std::size_t params = 0) {
    if (opt_.momentum == 0) return {};
    if (momentum_.size() == 0 && params) momentum_.resize(params);
    return {{"momentum_buffer", detail::state_span(momentum_)}};
  }

 private:
  SgdOptions opt_;
  typename Backend::template buffer<T> momentum_;
};

Sgd(SgdOptions)->Sgd<float>;

} // namespace cohort
