#pragma once
/// \file
/// Runs a network's layers forward and backward over a batch: owns the activations and the
/// per-layer scratch, borrows parameters and gradients.
///
/// Separating the executor from the stores is what lets several replicas share one set of
/// parameters (each with its own executor and gradients), and a backward pass write into any
/// gradient store (accumulation, deterministic chunked reduction).

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/layers/layer.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/network/freezing.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/batch.hpp"

namespace cohort {

/// Seconds spent in each layer's forward and backward passes, when profiling is on
/// (`executor.set_profile(&profile)`): the per-layer table of bench/profile_layers.
struct LayerProfile {
  std::vector<double> forward, backward;
  std::vector<std::size_t> calls;
  void clear() {
    std::fill(forward.begin(), forward.end(), 0.0);
    std::fill(backward.begin(), backward.end(), 0.0);
    std::fill(calls.begin(), calls.end(), 0);
  }
};

/// Options of a backward pass.
struct BackwardOptions {
  /// Add to the gradient store instead of overwriting it (gradient accumulation).
  bool accumulate = false;
  /// Also compute d loss / d input (skipped by default: nothing upstream needs it).
  bool input_grad = false;
};

/// Where a chain's tensors start in the flat stores: a whole network's stores, or a block's
/// slice of its enclosing network's (layers/residual.hpp runs its branches on those). `master`:
/// under mixed precision, the float master copy of `values` (same layout), else null.
template <class T>
struct StorePointers {
  const T* values = nullptr;
  accumulator_t<T>* buffers = nullptr;
  std::int64_t* counters = nullptr;
  const accumulator_t<T>* master = nullptr;
};

/// The default backward hook: does nothing. A hook is called as `hook(layer_index)` as soon as
/// that layer's parameter gradients are final, in reverse layer order (for overlapping
/// all-reduce with the rest of the backward pass).
struct NoHook {
  constexpr void operator()(std::size_t) const noexcept {}
};

/// What a backward pass calls a hook through: a non-owning reference to any callable
/// `void(std::size_t)` (NoHook: none), valid for the call it is passed to. Not a template
/// parameter of backward: the pass is then one function per network and storage type, which the
/// compiled kernel library can hold for every engine alike (network/compiled_executor.hpp), and
/// an indirect call per layer and pass costs nothing beside the layer.
class BackwardHook {
 public:
  constexpr BackwardHook() noexcept = default;
  constexpr BackwardHook(NoHook) noexcept {}
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, BackwardHook> && !std::is_same_v<std::remove_cvref_t<F>, NoHook> &&
           std::is_invocable_v<F&, std::size_t>) BackwardHook(F&& f)
  noexcept // NOLINT(google-explicit-constructor): any callable is a hook
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, std::size_t layer) { (*static_cast<std::remove_reference_t<F>*>(o))(layer); }) {}
  void operator()(std::size_t layer) const {
    if (call_) call_(object_, layer);
  }

 private:
  void* object_ = nullptr;
  void (*call_)(void*, std::size_t) = nullptr;
};

namespace detail {
template <class List, class Backend, class T>
struct state_tuple;
template <class... Bs, class Backend, class T>
struct state_tuple<type_list<Bs...>, Backend, T> {
  using type = std::tuple<typename Bs::template state<Backend, T>...>;
};

template <class List>
struct max_activation;
template <class... Bs>
struct max_activation<type_list<Bs...>> {
  static constexpr std::size_t value = std::max({std::size_t(1), Bs::input_shape::size...});
};
} // namespace detail

/// Which following layers a layer runs inside its own kernels (its backend fuses them).
enum class Fusion : std::uint8_t {
  none,      ///< only itself
  relu,      ///< itself and the ReLU after it
  relu_pool, ///< itself, the ReLU after it and then a 2x2 max-pool
};
/// The layers after the leader that a fused group absorbs (0, 1 or 2).
constexpr std::size_t absorbs(Fusion f) noexcept { return static_cast<std::size_t>(f); }

/// Forward/backward over a batch for network `Net` with element type `T` on `Backend`.
template <ChainDescription Net, class T, class Backend>
class Executor {
  using layers = typename Net::layers;
  static constexpr std::size_t L = Net::layer_count;
  template <std::size_t I>
  using layer = detail::at_t<I, layers>;

 public:
  using input_shape = typename Net::input_shape;
  using output_shape = typename Net::output_shape;
  using params_type = Parameters<Net, T, Backend>;
  using grads_type = Gradients<Net, T, Backend>;
  using context_type = typename Backend::context;

  /// Makes room for batches of up to `batch` samples. Allocation happens here, only when the
  /// batch grows past every earlier one.
  void reserve(std::size_t batch) {
    if (batch <= capacity_) return;
    capacity_ = batch;
    each_layer([&]<std::size_t I>() {
      using B = layer<I>;
      // Layers fused into a group write only the group's last output.
      if constexpr (!detail::is_view_layer<B>())
        if (writes_output<I>()) outputs_[I].resize(batch * B::output_shape::size);
      std::get<I>(states_).reserve(batch);
    });
  }

  /// Runs every layer on `x` (which must stay alive until backward). Returns a view of the
  /// output, valid until the next forward.
  /// `master`: under mixed precision, the float master copy of the parameters (same layout).
  ConstBatchView<output_shape, T> forward(context_type& ctx, const StepInfo& step, params_type& p,
                                          ConstBatchView<input_shape, T> x, const accumulator_t<T>* master = nullptr) {
    return forward(ctx, step, StorePointers<T>{p.values.data(), p.buffers.data(), p.counters.data(), master}, x);
  }
  /// The same on tensors found through pointers (a block's slice of the stores). (Defined below
  /// the class, not inline: compiled mode declares a registered network's instance `extern
  /// template`, models/compiled_networks.hpp.)
  ConstBatchView<output_shape, T> forward(context_type& ctx, const StepInfo& step, const StorePointers<T>& p,
                                          ConstBatchView<input_shape, T> x);

  /// Back-propagates `dy` (d loss / d output of the last forward) into `g`. Returns d loss / d
  /// input when `opts.input_grad`, else an empty view.
  ConstBatchView<input_shape, T> backward(context_type& ctx, const params_type& p, grads_type& g,
                                          ConstBatchView<output_shape, T> dy, BackwardOptions opts = {},
                                          BackwardHook hook = {}, const accumulator_t<T>* master = nullptr) {
    // Backward reads parameters and running statistics only.
    const StorePointers<T> at{p.values.data(), const_cast<accumulator_t<T>*>(p.buffers.data()), nullptr, master};
    return backward(ctx, at, g.values.data(), dy, opts, hook);
  }
  /// The same on tensors found through pointers, gradients written from `grads` on. (Defined
  /// below the class, as forward.)
  ConstBatchView<input_shape, T> backward(context_type& ctx, const StorePointers<T>& p, accumulator_t<T>* grads,
                                          ConstBatchView<output_shape, T> dy, BackwardOptions opts = {},
                                          BackwardHook hook = {});

  /// Freezes layers (network/freezing.hpp; an empty FrozenLayers unfreezes): they run in
  /// evaluation mode when `f.eval_mode`, write no parameter gradients and fire no hook, and
  /// backward stops at the lowest layer with trainable parameters.
  void set_frozen(const FrozenLayers& f) {
    if (!f.layer.empty() && f.layer.size() != L)
      throw ShapeError(detail::concat("Executor::set_frozen: ", f.layer.size(), " layers given, the network has ", L));
    frozen_ = f;
    first_trainable_ = 0;
    std::size_t scratch = 0;
    if (f.any()) {
      first_trainable_ = L;
      each_layer([&]<std::size_t I>() {
        if (!layer<I>::parameters.empty() && !f[I] && first_trainable_ == L) first_trainable_ = I;
      });
      each_layer([&]<std::size_t I>() {
        if (f[I] && below(first_trainable_, I))
          scratch = std::max(scratch, Net::layout.param_base[I + 1] - Net::layout.param_base[I]);
      });
    }
    frozen_grads_.resize(scratch);
  }
  const FrozenLayers& frozen() const noexcept { return frozen_; }

  /// Times every layer into `p` (nullptr: off). Costs two clock reads per layer and pass.
  void set_profile(LayerProfile* p) {
    profile_ = p;
    if (p) {
      p->forward.assign(L, 0.0);
      p->backward.assign(L, 0.0);
      p->calls.assign(L, 0);
    }
  }

  /// Fusion of a ReLU, or a ReLU and a max-pool, into the convolution before them (on by
  /// default where the backend supports it). Results are bitwise the same either way; off costs
  /// memory passes over full-size activations and gradients.
  void set_fusion(bool on) noexcept { fusion_ = on; }
  /// The position layers report as theirs (ForwardArgs::index: it selects dropout streams)
  /// starts here: 0 for a network, a number of its own for each branch of each block.
  void set_index_base(std::size_t base) noexcept { index_base_ = base; }
  bool fusion() const noexcept { return fusion_; }

  /// Batch size of the last forward pass.
  std::size_t batch() const noexcept { return batch_; }
  /// The largest batch the activation buffers hold without growing (0 before the first forward).
  std::size_t capacity() const noexcept { return capacity_; }
  /// Output of layer `i` (input of layer i+1) from the last forward pass. Inside a fused group
  /// (Conv2d -> ReLU [-> MaxPool2d]) every layer reports the group's output.
  const T* activation(std::size_t i) const noexcept { return act_[i + 1]; }

 private:
  /// a < b, as a function: with a layer index known at compile time, nvcc would call `I < x` for
  /// I = 0 a pointless comparison (an error under -Werror all-warnings).
  static constexpr bool below(std::size_t a, std::size_t b) noexcept { return a < b; }

  /// The pass as layer i sees it: a frozen layer in eval mode runs as in evaluation.
  const StepInfo& step_of(std::size_t i) const noexcept {
    return frozen_.eval_mode && frozen_[i] ? frozen_step_ : step_;
  }

  /// Which following layers layer I can run inside its own kernels (Fusion).
  template <std::size_t I>
  static constexpr Fusion fusable() {
    if constexpr (I + 1 < L) {
      using B = layer<I>;
      if constexpr (requires { B::template fuses_relu<Backend, T>; }) {
        if constexpr (B::template fuses_relu<Backend, T> && std::is_same_v<typename layer<I + 1>::layer, ReLU>) {
          if constexpr (I + 2 < L) {
            using P = layer<I + 2>;
            if constexpr (is_max_pool2d<typename P::layer>)
              if constexpr (requires { B::template fuses_relu_pool<Backend, T, typename P::geometry>; })
                if constexpr (B::template fuses_relu_pool<Backend, T, typename P::geometry>) return Fusion::relu_pool;
          }
          return Fusion::relu;
        }
      }
    }
    return Fusion::none;
  }
  /// Layers fused into layer I on this run (none when fusion is off).
  template <std::size_t I>
  Fusion fused_count() const noexcept {
    return fusion_ ? fusable<I>() : Fusion::none;
  }
  /// Layer I runs inside an earlier layer's kernels.
  template <std::size_t I>
  bool absorbed() const noexcept {
    if constexpr (I >= 2) return absorbs(fused_count<I - 1>()) >= 1 || absorbs(fused_count<I - 2>()) >= 2;
    if constexpr (I == 1) return absorbs(fused_count<0>()) >= 1;
    return false;
  }
  /// Layer I's output buffer is written (it is the last layer of its group, or in none).
  template <std::size_t I>
  bool writes_output() const noexcept {
    if (fused_count<I>() != Fusion::none) return false;
    if constexpr (I >= 1) return fused_count<I - 1>() != Fusion::relu_pool;
    return true;
  }
  /// The buffer a group led by layer I writes: its last layer's output, grown here if fusion was
  /// switched since reserve().
  template <std::size_t I>
  T* group_output(Fusion fused) {
    const auto get = [&]<std::size_t J>() {
      auto& buffer = outputs_[J];
      const std::size_t need = capacity_ * layer<J>::output_shape::size;
      if (buffer.size() < need) buffer.resize(need);
      return buffer.data();
    };
    if constexpr (fusable<I>() == Fusion::relu_pool)
      if (fused == Fusion::relu_pool) return get.template operator()<I + 2>();
    if constexpr (fusable<I>() != Fusion::none)
      if (fused == Fusion::relu) return get.template operator()<I + 1>();
    return get.template operator()<I>();
  }

  template <class F>
  static void each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<I>(), ...); }
    (std::make_index_sequence<L>{});
  }
  template <class F>
  static void each_layer_reversed(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f.template operator()<L - 1 - I>(), ...); }
    (std::make_index_sequence<L>{});
  }

  typename detail::state_tuple<layers, Backend, T>::type states_;
  std::array<typename Backend::template buffer<T>, L> outputs_;
  std::array<typename Backend::template buffer<T>, 2> grads_; // ping-pong d loss / d activation
  std::array<const T*, L + 1> act_{};
  std::size_t batch_ = 0, capacity_ = 0;
  StepInfo step_{}, frozen_step_{};
  FrozenLayers frozen_{};
  std::size_t first_trainable_ = 0; // backward stops here (Freeze)
  typename Backend::template buffer<accumulator_t<T>> frozen_grads_;
  LayerProfile* profile_ = nullptr;
  bool fusion_ = true;
  std::size_t index_base_ = 0;
};

template <ChainDescription Net, class T, class Backend>
auto Executor<Net, T, Backend>::forward(context_type& ctx, const StepInfo& step, const StorePointers<T>& p,
                                        ConstBatchView<input_shape, T> x) -> ConstBatchView<output_shape, T> {
  if (x.batch() == 0) throw ValueError("forward: the batch is empty");
  reserve(x.batch());
  batch_ = x.batch();
  step_ = step;
  frozen_step_ = step;
  frozen_step_.mode = Mode::eval;
  frozen_step_.update_buffers = false;
  act_[0] = x.data();
  each_layer([&]<std::size_t I>() {
    using B = layer<I>;
    if constexpr (detail::is_view_layer<B>()) {
      act_[I + 1] = act_[I];
    } else if (absorbed<I>()) {
      act_[I + 1] = act_[I]; // an earlier layer of the group already applied this one
    } else {
      const Fusion fused = fused_count<I>();
      T* out = group_output<I>(fused);
      const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const ForwardArgs<Backend, T> args{ctx,
                                         step_of(I),
                                         index_base_ + I,
                                         batch_,
                                         p.values + Net::layout.param_base[I],
                                         p.buffers + Net::layout.buffer_base[I],
                                         p.counters + Net::layout.counter_base[I],
                                         act_[I],
                                         out,
                                         fused != Fusion::none,
                                         p.master ? p.master + Net::layout.param_base[I] : nullptr};
      if constexpr (fusable<I>() == Fusion::relu_pool) {
        if (fused == Fusion::relu_pool)
          B::template forward_relu_pool<Backend, T, typename layer<I + 2>::geometry>(args, std::get<I>(states_));
        else
          B::template forward<Backend, T>(args, std::get<I>(states_));
      } else {
        B::template forward<Backend, T>(args, std::get<I>(states_));
      }
      act_[I + 1] = out;
      if (profile_) {
        profile_->forward[I] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++profile_->calls[I];
      }
    }
  });
  return {act_[L], batch_};
}

template <ChainDescription Net, class T, class Backend>
auto Executor<Net, T, Backend>::backward(context_type& ctx, const StorePointers<T>& p, accumulator_t<T>* grads,
                                         ConstBatchView<output_shape, T> dy, BackwardOptions opts, BackwardHook hook)
    -> ConstBatchView<input_shape, T> {
  if (batch_ == 0) throw ValueError("backward: call forward first");
  if (dy.batch() != batch_)
    throw ShapeError(
        detail::concat("backward: the gradient has batch ", dy.batch(), ", the last forward had batch ", batch_));
  // The ping-pong gradient buffers are allocated by the first backward pass (inference never
  // needs them).
  constexpr std::size_t largest = detail::max_activation<layers>::value;
  for (auto& buffer : grads_)
    if (buffer.size() < capacity_ * largest) buffer.resize(capacity_ * largest);
  const T* d_out = dy.data();
  int holder = -1; // which of grads_ holds d_out (-1: the caller's memory)
  each_layer_reversed([&]<std::size_t I>() {
    using B = layer<I>;
    // Below the lowest trainable layer nothing needs a gradient (Freeze), unless the caller
    // wants d loss / d input.
    if (below(I, first_trainable_) && !opts.input_grad) return;
    const bool need_dx = below(first_trainable_, I) || opts.input_grad;
    if constexpr (detail::is_view_layer<B>()) {
      return; // d_out already is d_in
    } else {
      if (absorbed<I>()) return; // handled by the group's first layer, which sees d_out
      if (!need_dx && B::parameters.size() == 0) return;
      const Fusion fused = fused_count<I>();
      const int target = holder == 0 ? 1 : 0;
      T* dx = need_dx ? grads_[target].data() : nullptr;
      // A frozen layer above a trainable one passes the gradient on; its own weight gradient
      // goes to scratch, never into the store (no kernel of any layer has to know).
      const bool frozen = frozen_[I];
      const auto t0 = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const BackwardArgs<Backend, T> args{ctx,
                                          step_of(I),
                                          index_base_ + I,
                                          batch_,
                                          p.values + Net::layout.param_base[I],
                                          frozen ? frozen_grads_.data() : grads + Net::layout.param_base[I],
                                          p.buffers + Net::layout.buffer_base[I],
                                          act_[I],
                                          act_[I + 1],
                                          d_out,
                                          dx,
                                          opts.accumulate && !frozen,
                                          fused != Fusion::none,
                                          p.master ? p.master + Net::layout.param_base[I] : nullptr};
      if constexpr (fusable<I>() == Fusion::relu_pool) {
        if (fused == Fusion::relu_pool)
          B::template backward_relu_pool<Backend, T, typename layer<I + 2>::geometry>(args, std::get<I>(states_));
        else
          B::template backward<Backend, T>(args, std::get<I>(states_));
      } else {
        B::template backward<Backend, T>(args, std::get<I>(states_));
      }
      if (profile_)
        profile_->backward[I] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if constexpr (B::parameters.size() > 0)
        if (!frozen) hook(I);
      d_out = dx;
      holder = target;
    }
  });
  return opts.input_grad ? ConstBatchView<input_shape, T>{d_out, batch_} : ConstBatchView<input_shape, T>{};
}

} // namespace cohort
