#pragma once
/// \file
/// `Lookahead<Base>`: Lookahead (Zhang, Lucas, Hinton and Ba, 2019, Algorithm 1) around any
/// optimiser. The base optimiser moves the "fast" weights; every k-th step the "slow" weights
/// move a fraction alpha toward them and the fast weights restart from there. airbench keeps the
/// same pair of weights for its short CIFAR-10 runs.
/// Example (compiled: tests/docs/headers.cpp, "optim/lookahead"):
///
///     cohort::Lookahead<cohort::Sgd<>> opt(cohort::Sgd({.lr = 0.1, .momentum = 0.9}), {.k = 5, .alpha = 0.5});
///     cohort::Trainer<Net, decltype(opt)> trainer(std::move(opt));
///
/// Semantics, element for element (the fixture generator, tests/reference/make_reference.py,
/// runs them in torch):
///
///     slow = weights before the first step                  # the paper's phi_0 = theta_0
///     each step:  base.step();  if base.steps() % k == 0:
///                   slow.lerp_(fast, alpha); fast.copy_(slow)   # torch.lerp on float tensors
///
/// The base optimiser's own state (momentum, Adam's moments) carries over a synchronisation, as
/// in the paper and timm. timm's `Lookahead` differs in one point: it creates the slow weights
/// at the first synchronisation (from the weights then, so that one is a no-op); the paper's and
/// this one's start from the weights before training. Only parameters take part, not
/// BatchNorm's running statistics (every implementation's choice).
///
/// The slow weights are optimiser state: checkpoints store them as the slot
/// "lookahead_slow_buff" and a resume continues bit for bit. The count is the base optimiser's
/// step count (saved with it). The checkpoint name is "Lookahead(<base's name>)", so a
/// checkpoint resumes only into a Lookahead over the same optimiser. Host optimisers only
/// (as OptimizerVariant): the slow weights live in host memory, so device engines, which move
/// their optimiser to the device (rebind_backend), refuse it at compile time. To choose it at
/// run time, list `Lookahead<Sgd<>>` among an OptimizerVariant's alternatives.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/core/error.hpp"
#include "cohort/optim/detail/torch_lerp.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Lookahead's settings (the paper's defaults).
struct LookaheadOptions {
  /// Synchronise after every k-th step of the base optimiser (>= 1).
  std::size_t k = 5;
  /// How far the slow weights move toward the fast ones at a synchronisation, in [0, 1].
  double alpha = 0.5;
};

namespace detail {
/// "Lookahead(" + Base::name + ")" as a constant (checkpoints and OptimizerVariant need a static
/// name).
template <class Base>
struct LookaheadName {
  static constexpr std::string_view prefix = "Lookahead(";
  static constexpr std::size_t size = prefix.size() + Base::name.size() + 1;
  static constexpr std::array<char, size> text = [] {
    std::array<char, size> a{};
    std::size_t i = 0;
    for (const char c : prefix) a[i++] = c;
    for (const char c : Base::name) a[i++] = c;
    a[i] = ')';
    return a;
  }();
};
} // namespace detail

template <class Base>
class Lookahead {
  static_assert(Optimizer<Base>, "Lookahead<Base>: Base must be an optimiser (Sgd<>, Adam<>, ...)");
  static_assert(
      requires { std::string_view(Base::name); },
      "Lookahead<Base>: Base needs a static `name` (Sgd<>, Adam<>, ...); for a run-time choice list "
      "Lookahead<Sgd<>> among an OptimizerVariant's alternatives instead of wrapping the variant");
  static_assert(std::is_same_v<typename Base::backend_type, Cpu>,
                "Lookahead<Base>: the slow weights live in host memory: Base must be a CPU optimiser");

 public:
  using base_type = Base;
  using backend_type = Cpu;
  using options_type = LookaheadOptions;
  static constexpr std::string_view name{detail::LookaheadName<Base>::text.data(), detail::LookaheadName<Base>::size};

  explicit Lookahead(Base base, LookaheadOptions o = {}) : base_(std::move(base)), opt_(o) {
    if (o.k == 0) throw ValueError("Lookahead: invalid k: 0 (expected >= 1: synchronise every k-th step)");
    detail::require(o.alpha >= 0 && o.alpha <= 1, "Lookahead", "alpha", o.alpha, "0 <= alpha <= 1");
  }

  void step(std::span<float> params, std::span<const float> grads) {
    if (slow_.size() != 0 && slow_.size() != params.size())
      throw ShapeError(detail::concat("Lookahead: slow weights were built for ", slow_.size(),
                                      " parameters, step() got ", params.size()));
    if (base_.steps() == 0 || slow_.size() == 0) { // the weights before training (or before wrapping)
      slow_.resize(params.size());
      std::copy(params.begin(), params.end(), slow_.data());
    }
    base_.step(params, grads);
    if (base_.steps() % opt_.k == 0) synchronise(params);
  }
  /// One step on a whole network (as the other optimisers' step(net)).
  template <class Net>
  requires requires(Net& n) {
    n.parameter_store();
    n.gradient_store();
  }
  void step(Net& net) {
    if constexpr (requires { net.frozen_parameters(); })
      if (net.frozen_parameters() != base_.step_settings().frozen) base_.set_frozen(net.frozen_parameters());
    step(net.parameter_store(), net.gradient_store());
  }

  /// The slow weights, parallel to the flat parameter array (empty before the first step).
  std::span<const float> slow_weights() const noexcept { return {slow_.data(), slow_.size()}; }
  const LookaheadOptions& options() const noexcept { return opt_; }
  Base& base() noexcept { return base_; }
  const Base& base() const noexcept { return base_; }

  /// Checkpoint state: the base optimiser's slots, then "lookahead_slow_buff" (allocated when
  /// missing so that a checkpoint can be loaded into a fresh optimiser).
  std::vector<OptimizerSlot<float>> slots(std::size_t params = 0) {
    auto s = base_.slots(params);
    if (slow_.size() == 0 && params) slow_.resize(params);
    if (slow_.size() != 0) s.push_back({"lookahead_slow_buff", std::span<float>(slow_.data(), slow_.size())});
    return s;
  }

  // Everything else is the base optimiser's.
  std::uint64_t steps() const noexcept { return base_.steps(); }
  void set_steps(std::uint64_t s) noexcept { base_.set_steps(s); }
  double lr() const noexcept { return base_.lr(); }
  void set_lr(double lr) { base_.set_lr(lr); }
  void set_momentum(double m) requires requires(Base& b) { b.set_momentum(m); }
  { base_.set_momentum(m); }
  void set_parameter_groups(std::vector<ParameterGroup> groups) { base_.set_parameter_groups(std::move(groups)); }
  void set_max_grad_norm(double max_norm) { base_.set_max_grad_norm(max_norm); }
  void set_frozen(std::vector<ParameterRange> ranges) { base_.set_frozen(std::move(ranges)); }
  const StepSettings& step_settings() const noexcept { return base_.step_settings(); }
  void set_step_settings(const StepSettings& s) { base_.set_step_settings(s); }
  double last_grad_norm() const noexcept { return base_.last_grad_norm(); }
  void set_threads(ThreadPool* pool) noexcept { base_.set_threads(pool); }
  ThreadPool& threads() const noexcept { return base_.threads(); }

 private:
  /// slow.lerp_(fast, alpha); fast.copy_(slow). Frozen parameters equal their slow copy, which
  /// the lerp leaves exactly as it is.
  void synchronise(std::span<float> params) {
    detail::torch_lerp(slow_.data(), params.data(), params.size(), float(opt_.alpha));
    std::copy(slow_.data(), slow_.data() + slow_.size(), params.data());
  }

  Base base_;
  LookaheadOptions opt_;
  HostBuffer<float> slow_;
};

} // namespace cohort
