#pragma once
/// \file
/// What every optimiser provides, and the helpers they share.
/// Example (compiled: tests/docs/headers.cpp, "optim/optimizer"):
///
///     cohort::Adam opt({.lr = 1e-3});
///     opt.step(net);          // or opt.step(params_span, grads_span)
///
/// Optimisers update the flat parameter array in one pass. Their update rules are written as
/// element functions (host and device), in the same operation order as PyTorch's single-tensor
/// implementations, so results agree with torch.optim to float rounding.

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/error.hpp"
#include "cohort/network/freezing.hpp"
#include "cohort/optim/parameter_groups.hpp"

namespace cohort {

/// A named piece of optimiser state, parallel to the flat parameter array ("exp_avg").
template <class T>
struct OptimizerSlot {
  std::string name;
  std::span<T> values;
};

/// What an optimiser does around its update rule, the same for every optimiser: parameter groups
/// (optim/parameter_groups.hpp) and clipping the gradients by their global norm
/// (torch.nn.utils.clip_grad_norm_ before optimizer.step()). Device engines copy them from the
/// host optimiser to each device's.
struct StepSettings {
  /// Empty: one group, the optimiser's own settings.
  std::vector<ParameterGroup> groups{};
  /// > 0: gradients are scaled by min(1, max_grad_norm / (norm + 1e-6)) before the update.
  double max_grad_norm = 0;
  /// Runs of the parameter array the update leaves alone, parameters and state (frozen layers:
  /// network/freezing.hpp), sorted and disjoint.
  std::vector<ParameterRange> frozen{};
};

/// An optimiser over flat parameter and gradient arrays.
template <class O>
concept Optimizer = requires(O& o, std::span<float> p, std::span<const float> g) {
  o.step(p, g);
  { o.steps() } -> std::convertible_to<std::uint64_t>;
  o.slots();
};

/// The name a checkpoint records for optimiser `o`: its type's static `name`, or, for a run-time
/// choice such as OptimizerVariant, the held optimiser's.
template <class O>
std::string_view optimizer_name(const O& o) noexcept {
  if constexpr (requires { o.name(); })
    return o.name();
  else
    return O::name;
}

namespace detail {
/// What every optimiser shares: the step count, stepping a whole network, and where the update
/// runs (`Backend`: the CPU's threads, or a device's kernels with the state in device memory).
template <class Derived, class Backend = Cpu>
class OptimizerBase {
 public:
  using backend_type = Backend;

  /// One step on every parameter of `net` with its current gradients (a network on the same
  /// backend: the optimiser's state lives in that backend's memory).
  template <class Net>
  requires requires(Net& n) {
    n.parameter_store();
    n.gradient_store();
  }
  void step(Net& net) {
    static_assert(std::is_same_v<typename Net::backend_type, Backend>,
                  "optimizer step: the optimiser and the network are on different backends (an optimiser's "
                  "second template argument is its backend: Sgd<float, ThrustDevice> steps a Network<Net, float, "
                  "ThrustDevice>)");
    if constexpr (requires { net.frozen_parameters(); })
      if (net.frozen_parameters() != settings_.frozen) set_frozen(net.frozen_parameters());
    static_cast<Derived&>(*this).step(net.parameter_store(), net.gradient_store());
  }
  /// Steps taken so far (saved in checkpoints: Adam's bias correction depends on it).
  std::uint64_t steps() const noexcept { return steps_; }
  void set_steps(std::uint64_t s) noexcept { steps_ = s; }
  /// The threads step() runs on (null: the process's pool, set_num_threads). ThreadedReplicas
  /// points it at its replica threads. CPU optimisers only.
  void set_threads(ThreadPool* pool) noexcept requires std::is_same_v<Backend, Cpu> {
    ctx_.pool = pool ? pool : &ThreadPool::global();
  }
  ThreadPool& threads() const noexcept requires std::is_same_v<Backend, Cpu> { return ctx_.threads(); }
  /// Where a device optimiser's kernels run (its stream).
  void set_context(const typename Backend::context& ctx) { ctx_ = ctx; }
  typename Backend::context& context() noexcept { return ctx_; }

  /// Treat runs of the parameter array differently (parameter_groups<Net>(rule)); empty: one
  /// group with the optimiser's settings. Checked here, and against the array at each step.
  void set_parameter_groups(std::vector<ParameterGroup> groups) {
    check_parameter_groups(Derived::name.data(), groups);
    settings_.groups = std::move(groups);
  }
  /// Clip the gradients to global L2 norm `max_norm` before each update (0: no clipping), as
  /// torch.nn.utils.clip_grad_norm_(params, max_norm) right before optimizer.step(). The
  /// engines step on the gradients after they are summed over replicas and ranks and, under
  /// fp16, unscaled: every replica and rank sees the same norm and clips alike.
  void set_max_grad_norm(double max_norm) {
    if (!(max_norm >= 0) || !std::isfinite(max_norm))
      throw ValueError(concat(Derived::name, ": invalid max_grad_norm: ", max_norm, " (expected a finite value >= 0)"));
    settings_.max_grad_norm = max_norm;
  }
  /// Leave these runs of the parameter array alone (parameters and optimiser state): the frozen
  /// layers' (frozen_parameter_ranges<Net>). step(net) takes them from the network.
  void set_frozen(std::vector<ParameterRange> ranges) {
    for (std::size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].size == 0 || (i > 0 && ranges[i].offset < ranges[i - 1].offset + ranges[i - 1].size))
        throw ValueError(concat(Derived::name, ": frozen range ", i, " [", ranges[i].offset, ", ",
                                ranges[i].offset + ranges[i].size,
                                ") is empty or overlaps the one before (expected sorted, disjoint runs)"));
    settings_.frozen = std::move(ranges);
  }
  const StepSettings& step_settings() const noexcept { return settings_; }
  void set_step_settings(const StepSettings& s) {
    set_parameter_groups(s.groups);
    set_max_grad_norm(s.max_grad_norm);
    set_frozen(s.frozen);
  }
  /// The global gradient norm of the last step, before clipping (NaN when clipping is off or no
  /// step was taken): what clip_grad_norm_ returns.
  double last_grad_norm() const noexcept { return last_grad_norm_; }
  void set_last_grad_norm(double n) noexcept { last_grad_norm_ = n; }

 protected:
  /// The factor on every gradient of this step: 1 without clipping, else torch's
  /// clamp(max_norm / (norm + 1e-6), max=1), in float as torch computes it on float tensors.
  template <class T>
  T clip_coefficient(std::span<const T> grads) {
    if (settings_.max_grad_norm == 0) return T(1);
    last_grad_norm_ = std::sqrt(ops::ElementwiseKernels<Backend>::sum_of_squares(ctx_, grads.data(), grads.size()));
    // torch: max_norm / (norm + 1e-6) on a float tensor is (norm + 1e-6).reciprocal() * max_norm
    const T coef = (T(1) / (T(last_grad_norm_) + T(1e-6))) * T(settings_.max_grad_norm);
    return coef < T(1) ? coef : T(1); // NaN norm: NaN coefficient, NaN update (torch's default)
  }
  /// f(offset, size, lr_scale, weight_decay) for each parameter group of an n-element array
  /// (`weight_decay`: the optimiser's, for groups that keep it), each group cut into the pieces
  /// that lie outside the frozen runs (sorted, disjoint: set_frozen checks).
  template <class F>
  void for_each_group(std::size_t n, double weight_decay, F&& f) const {
    const std::vector<ParameterRange>& frozen = settings_.frozen;
    if (!frozen.empty() && frozen.back().offset + frozen.back().size > n)
      throw ShapeError(concat(Derived::name, ": frozen parameters end at ", frozen.back().offset + frozen.back().size,
                              ", step() got ", n, " (frozen ranges built for another network?)"));
    std::size_t k = 0; // first frozen run that may overlap the current group
    const auto pieces = [&](std::size_t at, std::size_t size, double lr_scale, double wd) {
      const std::size_t end = at + size;
      while (k < frozen.size() && frozen[k].offset + frozen[k].size <= at) ++k;
      for (std::size_t j = k; at < end; ++j) {
        const std::size_t stop = j < frozen.size() ? std::min(frozen[j].offset, end) : end;
        if (stop > at) f(at, stop - at, lr_scale, wd);
        if (j >= frozen.size()) break;
        at = std::max(at, frozen[j].offset + frozen[j].size);
      }
    };
    if (settings_.groups.empty()) {
      pieces(0, n, 1.0, weight_decay);
      return;
    }
    const ParameterGroup& last = settings_.groups.back();
    if (last.offset + last.size != n)
      throw ShapeError(concat(Derived::name, ": parameter groups cover ", last.offset + last.size,
                              " parameters, step() got ", n, " (groups built for another network?)"));
    for (const ParameterGroup& g : settings_.groups)
      pieces(g.offset, g.size, g.settings.lr_scale, g.settings.weight_decay.value_or(weight_decay));
  }

  std::uint64_t steps_ = 0;
  typename Backend::context ctx_{};
  StepSettings settings_{};
  double last_grad_norm_ = std::numeric_limits<double>::quiet_NaN();
};

/// A flat optimiser state array as a span (HostBuffer and DeviceBuffer alike); device memory for
/// device optimisers, so only their engines read it (through host copies).
template <class Buffer>
auto state_span(Buffer& b) noexcept {
  return std::span(b.data(), b.size());
}

/// PyTorch's argument checks, with its wording: "Adam: invalid lr: -1 (expected >= 0)".
inline void require(bool ok, const char* opt, const char* what, double value, const char* expected) {
  if (!ok) throw ValueError(concat(opt, ": invalid ", what, ": ", value, " (expected ", expected, ")"));
}
inline void check_sizes(const char* opt, std::size_t params, std::size_t grads, std::size_t state) {
  if (params != grads) throw ShapeError(concat(opt, ": ", params, " parameters but ", grads, " gradients"));
  if (state != 0 && state != params)
    throw ShapeError(concat(opt, ": state was built for ", state, " parameters, step() got ", params));
}
} // namespace detail

} // namespace cohort
