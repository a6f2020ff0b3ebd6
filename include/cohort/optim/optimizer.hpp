#pragma once
/// \file
/// What every optimiser provides, and the helpers they share.
///
///     cohort::Adam opt({.lr = 1e-3});
///     opt.step(net);          // or opt.step(params_span, grads_span)
///
/// Optimisers update the flat parameter array in one pass. Their update rules are written as
/// element functions (host and device), in the same operation order as PyTorch's single-tensor
/// implementations, so results agree with torch.optim to float rounding.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/core/error.hpp"

namespace cohort {

/// A named piece of optimiser state, parallel to the flat parameter array ("exp_avg").
template <class T>
struct OptimizerSlot {
  std::string name;
  std::span<T> values;
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

 protected:
  std::uint64_t steps_ = 0;
  typename Backend::context ctx_{};
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
