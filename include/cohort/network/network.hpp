#pragma once
/// \file
/// A runnable network on one device: parameters, gradients and an executor together.
/// Example (compiled: tests/docs/headers.cpp, "network/network"):
///
///     cohort::Network<ModelA> net(/*seed=*/0);     // CPU, float, PyTorch's default init
///     auto logp = net.forward(images);              // images: xt::xtensor<float, 4> (N,1,28,28)
///     float loss = nll.forward(logp, labels);
///     net.backward(nll.backward());
///     opt.step(net);
///
/// Like torch.nn.Module it starts in training mode; `eval()` switches dropout off and makes
/// BatchNorm use its running statistics.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/freezing.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/batch.hpp"

namespace cohort {

/// `Network<Net, T = float, Backend = Cpu>`: an instance of description `Net`.
template <class Net, class T = float, class Backend = Cpu>
class Network {
  static_assert(NetworkDescription<Net>,
                "Network: Net must be a well-formed Sequential<Input<...>, Layers...> (see the first error above "
                "for the layer that does not fit)");
  static_assert(backend_available<Backend>,
                "Network: the Cuda backend needs CUDA: compile with nvcc, #include <cohort/backend/cuda.cuh> and link "
                "the cohort::cuda CMake target (ThrustDevice, cohort/backend/thrust_device.hpp, runs the same kernels "
                "without a GPU)");
  static_assert(std::is_floating_point_v<T>,
                "Network: T must be float or double (half types come through MixedPrecision)");
  static_assert(!backend_available<Backend> || BackendProtocol<Backend>,
                "Network: Backend does not satisfy cohort::BackendProtocol (backend/ops.hpp): a context type and "
                "every ops::*Kernels family; include the backend's header");

 public:
  using net_type = Net;
  using value_type = T;
  using backend_type = Backend;
  using input_shape = typename Net::input_shape;
  using output_shape = typename Net::output_shape;
  using params_type = Parameters<Net, T, Backend>;
  using grads_type = Gradients<Net, T, Backend>;
  using context_type = typename Backend::context;

  /// Initialises as PyTorch does by default, from `seed` (which also seeds dropout).
  explicit Network(std::uint64_t seed = 0) : seed_(seed) { params_.initialize(seed); }

  void train() noexcept { mode_ = Mode::train; }
  void eval() noexcept { mode_ = Mode::eval; }
  bool training() const noexcept { return mode_ == Mode::train; }
  Mode mode() const noexcept { return mode_; }

  /// Runs the network. `x` must stay alive until backward. The result is valid until the next
  /// forward.
  ConstBatchView<output_shape, T> forward(ConstBatchView<input_shape, T> x) {
    const StepInfo info{.mode = mode_,
                        .seed = seed_,
                        .step = step_,
                        .sample_offset = sample_offset_,
                        .sample_stride = sample_stride_,
                        .update_buffers = update_buffers_};
    auto y = exec_.forward(ctx_, info, params_, x);
    if (mode_ == Mode::train) ++step_;
    return y;
  }
  ConstBatchView<output_shape, T> forward(BatchView<input_shape, T> x) {
    return forward(ConstBatchView<input_shape, T>(x));
  }
  /// Runs the network on an xtensor container of shape (N, input_shape...); throws ShapeError
  /// when the shape differs.
  template <class Container>
  requires requires(const Container& c) {
    c.shape();
    c.data();
  }
  ConstBatchView<output_shape, T> forward(const Container& x) {
    return forward(as_batch<input_shape>(x, "Network input"));
  }

  /// Back-propagates d loss / d output into the gradients (overwriting them unless
  /// `opts.accumulate`). Returns d loss / d input when `opts.input_grad`.
  template <class Hook = NoHook>
  ConstBatchView<input_shape, T> backward(ConstBatchView<output_shape, T> dy, BackwardOptions opts = {},
                                          Hook&& hook = {}) {
    return exec_.backward(ctx_, params_, grads_, dy, opts, std::forward<Hook>(hook));
  }

  /// Sets every gradient to zero (only needed before accumulating into fresh gradients).
  void zero_grad() { grads_.values.fill(T(0)); }

  /// Keeps the layers `f` names fixed (network/freezing.hpp): no gradients for them (every
  /// gradient is zeroed now, so a frozen tensor's is zero), evaluation mode for them unless
  /// `f.eval_mode` is false, backward stops below the lowest trainable layer, and an optimiser
  /// stepping this network (`opt.step(net)`) skips them. A bad range or prefix throws ValueError.
  void freeze(const Freeze& f) {
    FrozenLayers resolved = frozen_layers<Net>(f);
    frozen_ranges_ = frozen_parameter_ranges<Net>(resolved);
    exec_.set_frozen(resolved);
    zero_grad();
  }
  /// Everything trains again.
  void unfreeze() {
    frozen_ranges_.clear();
    exec_.set_frozen({});
  }
  const FrozenLayers& frozen() const noexcept { return exec_.frozen(); }
  /// The parameter-store runs of the frozen layers (what opt.step(net) leaves alone).
  const std::vector<ParameterRange>& frozen_parameters() const noexcept { return frozen_ranges_; }

  params_type& parameters() noexcept { return params_; }
  const params_type& parameters() const noexcept { return params_; }
  grads_type& gradients() noexcept { return grads_; }
  const grads_type& gradients() const noexcept { return grads_; }
  Executor<Net, T, Backend>& executor() noexcept { return exec_; }
  context_type& context() noexcept { return ctx_; }

  /// Flat views for optimisers: every parameter and its gradient, state_dict order, padded.
  /// Host-memory backends only (a device network's optimiser steps run on the device).
  std::span<T> parameter_span() noexcept requires host_memory_backend<Backend> { return params_.values.span(); }
  std::span<const T> gradient_span() const noexcept requires host_memory_backend<Backend> {
    return grads_.values.span();
  }

  /// The same flat arrays on any backend (device memory for device backends): what optimisers
  /// of the network's backend step.
  std::span<T> parameter_store() noexcept { return {params_.values.data(), params_.values.size()}; }
  std::span<const T> gradient_store() const noexcept { return {grads_.values.data(), grads_.values.size()}; }

  /// Every tensor under its PyTorch state_dict name (host-memory backends; a device network
  /// copies its parameters to a host Parameters first: `host.copy_from(net.parameters())`).
  std::vector<TensorRef> state_dict() requires host_memory_backend<Backend> { return params_.state_dict(); }

  /// Training forward passes so far (selects dropout masks); saved in checkpoints.
  std::uint64_t step() const noexcept { return step_; }
  void set_step(std::uint64_t s) noexcept { step_ = s; }
  std::uint64_t seed() const noexcept { return seed_; }
  void set_seed(std::uint64_t s) noexcept { seed_ = s; }
  /// For replicas and ranks: where this shard's samples sit in the global batch (sample i is
  /// global sample offset + i * stride), and whether this instance updates running statistics.
  void set_shard(std::uint64_t sample_offset, bool update_buffers, std::uint64_t sample_stride = 1) noexcept {
    sample_offset_ = sample_offset;
    sample_stride_ = sample_stride;
    update_buffers_ = update_buffers;
  }

  static constexpr std::size_t parameter_count = Net::parameter_count;

  /// Bytes of activations a training forward keeps for backward at `batch` samples, from the
  /// shapes alone (every layer's output, a block's branches included; unfused, so an upper bound
  /// of what the executor holds), and the two gradient buffers backward cycles through. Evaluation
  /// and prediction in cohort never need more than training's (they run in chunks of at most the
  /// training batch). Parameters, gradients and optimiser state come on top: parameter_count
  /// values each.
  static constexpr std::size_t activation_bytes(std::size_t batch) noexcept {
    constexpr std::size_t kept = detail::activation_count<typename Net::layers>::value;
    constexpr std::size_t largest = detail::max_activation<typename Net::layers>::value;
    return batch * (kept + 2 * largest) * sizeof(T);
  }

 private:
  params_type params_;
  grads_type grads_;
  std::vector<ParameterRange> frozen_ranges_;
  Executor<Net, T, Backend> exec_;
  context_type ctx_{};
  Mode mode_ = Mode::train;
  std::uint64_t seed_ = 0, step_ = 0, sample_offset_ = 0, sample_stride_ = 1;
  bool update_buffers_ = true;
};

} // namespace cohort
