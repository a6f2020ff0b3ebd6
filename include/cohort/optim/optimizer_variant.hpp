#pragma once
/// \file
/// `OptimizerVariant<Os...>`: one of several optimisers, chosen at run time.
/// Example (compiled: tests/docs/headers.cpp, "optim/optimizer_variant"):
///
///     using AnyOpt = cohort::OptimizerVariant<cohort::Sgd<>, cohort::Adam<>, cohort::Adadelta<>>;
///     AnyOpt opt = flag == "adam" ? AnyOpt(cohort::Adam({.lr = 1e-3})) : AnyOpt(cohort::Sgd({.lr = 0.1}));
///     cohort::Trainer<Net, AnyOpt> trainer(std::move(opt));
///
/// For programs that pick the optimiser from a flag (train_mnist): the Trainer, its engines and
/// its checkpoint code are instantiated once instead of once per optimiser, which is most of what
/// a model costs to compile beyond its kernels. The choice costs one dispatch per optimiser step
/// (the update itself is the held optimiser's own loop), and checkpoints carry the held
/// optimiser's name, so they resume into that optimiser whether it is held directly or in a
/// variant.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/core/error.hpp"
#include "cohort/optim/optimizer.hpp"

namespace cohort {

namespace detail {
template <class T, class... Ts>
inline constexpr bool one_of = (std::is_same_v<T, Ts> || ...);

template <class... Ts>
consteval bool all_distinct() {
  if constexpr (sizeof...(Ts) < 2)
    return true;
  else
    return []<class H, class... R>(std::type_identity<H>, std::type_identity<R>...) {
      return !one_of<H, R...> && all_distinct<R...>();
    }(std::type_identity<Ts>{}...);
}
} // namespace detail

template <class... Os>
class OptimizerVariant {
  static_assert(sizeof...(Os) >= 1, "OptimizerVariant: name at least one optimiser");
  static_assert((Optimizer<Os> && ...),
                "OptimizerVariant: every alternative must be an optimiser (Sgd<>, Adam<>, Adadelta<>, ...)");
  static_assert((requires { std::string_view(Os::name); } && ...),
                "OptimizerVariant: every alternative needs a static `name` (written into checkpoints)");
  static_assert(detail::all_distinct<Os...>(), "OptimizerVariant: an optimiser type is listed twice");

 public:
  /// Holds `o`, one of the listed optimisers.
  template <class O>
  requires detail::one_of<std::remove_cvref_t<O>, Os...> OptimizerVariant(O&& o)
      : held_(std::forward<O>(o)) {} // NOLINT: implicit, like std::variant

  void step(std::span<float> params, std::span<const float> grads) {
    std::visit([&](auto& o) { o.step(params, grads); }, held_);
  }
  std::uint64_t steps() const noexcept {
    return std::visit([](const auto& o) { return std::uint64_t(o.steps()); }, held_);
  }
  /// The held optimiser's learning rate (LrSchedule).
  void set_lr(double lr) {
    std::visit([lr](auto& o) { o.set_lr(lr); }, held_);
  }
  /// The held optimiser's momentum (OneCycleLR's cycle_momentum); a ValueError for one without
  /// (Adadelta), as torch's OneCycleLR refuses it.
  void set_momentum(double m) {
    std::visit(
        [m](auto& o) {
          if constexpr (requires { o.set_momentum(m); })
            o.set_momentum(m);
          else
            throw ValueError(detail::concat(std::remove_cvref_t<decltype(o)>::name,
                                            " has no momentum to cycle (OneCycleLR: cycle_momentum=0)"));
        },
        held_);
  }
  double lr() const {
    return std::visit([](const auto& o) { return o.lr(); }, held_);
  }
  /// The held optimiser's parameter groups and gradient clipping (StepSettings).
  void set_parameter_groups(std::vector<ParameterGroup> groups) {
    std::visit([&](auto& o) { o.set_parameter_groups(std::move(groups)); }, held_);
  }
  void set_max_grad_norm(double max_norm) {
    std::visit([max_norm](auto& o) { o.set_max_grad_norm(max_norm); }, held_);
  }
  void set_frozen(std::vector<ParameterRange> ranges) {
    std::visit([&](auto& o) { o.set_frozen(std::move(ranges)); }, held_);
  }
  const StepSettings& step_settings() const noexcept {
    return std::visit([](const auto& o) -> const StepSettings& { return o.step_settings(); }, held_);
  }
  double last_grad_norm() const noexcept {
    return std::visit([](const auto& o) { return o.last_grad_norm(); }, held_);
  }
  void set_steps(std::uint64_t s) noexcept {
    std::visit([s](auto& o) { o.set_steps(s); }, held_);
  }
  void set_threads(ThreadPool* pool) noexcept {
    std::visit([pool](auto& o) { o.set_threads(pool); }, held_);
  }
  /// The held optimiser's checkpoint state (see its own slots()).
  std::vector<OptimizerSlot<float>> slots(std::size_t params = 0) {
    return std::visit([params](auto& o) { return o.slots(params); }, held_);
  }
  /// The held optimiser's name ("Adam"): checkpoints and rank agreement use it.
  std::string_view name() const noexcept {
    return std::visit([](const auto& o) { return std::string_view(std::remove_cvref_t<decltype(o)>::name); }, held_);
  }

  /// The held optimiser if it is an O, else null.
  template <class O>
  requires detail::one_of<O, Os...> O* get_if() noexcept { return std::get_if<O>(&held_); }
  template <class O>
  requires detail::one_of<O, Os...>
  const O* get_if() const noexcept { return std::get_if<O>(&held_); }

 private:
  std::variant<Os...> held_;
};

} // namespace cohort
