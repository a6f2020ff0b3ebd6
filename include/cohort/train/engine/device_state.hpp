#pragma once
/// \file
/// What the device engines share: one device's replica (its stores, executor, loss and
/// optimiser, and a step on them), moving parameters and optimiser state between a device and
/// their host copies (what checkpoints read and write), and the precision hooks.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/device_precision.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/precision_state.hpp"
#include "cohort/train/segmentation_metrics.hpp"

namespace cohort::detail {

/// Device parameters and optimiser state (slots, step count) into the host copies.
template <class Backend, class Ctx, class DevParams, class DevOpt, class HostParams, class HostOpt>
void state_to_host(Ctx& ctx, const DevParams& params, DevOpt& opt, HostParams& host, HostOpt& host_opt) {
  host.copy_from(params);
  auto host_slots = host_opt.slots(host.values.size());
  auto dev_slots = opt.slots(host.values.size());
  for (std::size_t i = 0; i < host_slots.size(); ++i)
    ops::ElementwiseKernels<Backend>::download(ctx, dev_slots[i].values.data(), host_slots[i].values.data(),
                                               host_slots[i].values.size());
  host_opt.set_steps(opt.steps());
  host_opt.set_last_grad_norm(opt.last_grad_norm());
}

/// The host copies (just loaded from a checkpoint) onto the device.
template <class Backend, class Ctx, class HostParams, class HostOpt, class DevParams, class DevOpt>
void state_to_device(Ctx& ctx, const HostParams& host, HostOpt& host_opt, DevParams& params, DevOpt& opt) {
  params.copy_from(host);
  auto host_slots = host_opt.slots(host.values.size());
  auto dev_slots = opt.slots(host.values.size());
  for (std::size_t i = 0; i < host_slots.size(); ++i)
    ops::ElementwiseKernels<Backend>::upload(ctx, host_slots[i].values.data(), dev_slots[i].values.data(),
                                             host_slots[i].values.size());
  opt.set_steps(host_opt.steps());
}

/// The context of a replica on `device` with the options' settings, its device made current on
/// the calling thread (what the replica's members then allocate on).
template <class Context>
Context device_context(int device, const DataParallelOptions& o) {
  Context ctx{};
  if constexpr (requires { ctx.device; }) ctx.device = device;
  if constexpr (requires { ctx.allow_tf32; }) ctx.allow_tf32 = o.allow_tf32;
  if constexpr (requires { ctx.activate(); }) ctx.activate(); // e.g. cudaSetDevice
  return ctx;
}

/// Opt moved to `Backend` (Opt::rebind_backend), or Opt itself when it has no such member (the
/// engines' static_assert then names the problem without a cascade of errors).
template <class Opt, class Backend>
struct device_optimizer {
  using type = Opt;
};
template <class Opt, class Backend>
requires requires { typename Opt::template rebind_backend<Backend>; }
struct device_optimizer<Opt, Backend> {
  using type = typename Opt::template rebind_backend<Backend>;
};

/// Whether optimiser Opt can run on a device backend.
template <class Opt, class Backend>
inline constexpr bool has_device_optimizer = requires {
  typename Opt::template rebind_backend<Backend>;
};

/// Everything one device holds for a device engine: the float master parameters, gradients,
/// executor, loss, the batch buffer, the optimiser (Opt on `Backend`) and the precision state
/// (DevicePrecision: under MixedPrecision the 16-bit compute copy and the loss scaler), with
/// the context they run in. Construct it with its device current (the members allocate there).
template <class Net, class Backend, class Opt, class Precision = FullPrecision>
class DeviceReplica {
  // Every device engine holds DeviceReplicas: the one place to check the optimiser.
  static_assert(
      has_device_optimizer<Opt, Backend>,
      "Trainer: on a device backend the optimiser must be Sgd<>, Adam<>, AdamW<>, RmsProp<> or Adadelta<> (an "
      "optimiser with "
      "rebind_backend; OptimizerVariant is host-only)");
  using K = ops::ElementwiseKernels<Backend>;
  using precision_type = DevicePrecision<Precision, Net, Backend>;
  using compute_type = typename precision_type::compute_type;

 public:
  using context = typename Backend::context;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  /// `ignore_index`: the label of pixels that add nothing (a dense network's PixelCrossEntropyLoss).
  DeviceReplica(const Opt& opt, const context& ctx, const LossScaleOptions& scaling = {},
                const CrossEntropyOptions& loss = {}, const FrozenLayers& frozen = {}, std::size_t eval_limit = 0,
                std::int32_t ignore_index = -100)
      : ctx_(ctx), prec_(scaling), loss_(make_loss<loss_type, classes_of<Net>>(loss, ignore_index)),
        opt_(opt.options()), eval_limit_(eval_limit) {
    opt_.set_step_settings(opt.step_settings()); // parameter groups, gradient clipping, frozen runs
    exec_.set_frozen(frozen);
    opt_.set_context(ctx_);
    loss_.set_context(ctx_);
  }

  /// Forward, loss and backward on the host batch `x`; parameter gradients written into (or with
  /// `accumulate` added to) this replica's, scaled by `grad_scale` (and the loss scale);
  /// `hook(layer)` as each layer's gradients are final (see Executor::backward); `denominator`:
  /// what the loss is normalised by (0: the batch's own count or weight total; see ShardNorm).
  /// Returns the loss.
  template <class Hook = NoHook>
  double train(const StepInfo& info, input_view x, std::span<const std::int32_t> labels, double grad_scale,
               bool accumulate, Hook&& hook = {}, double denominator = 0) {
    return guarded("the training step", [&] {
      auto& p = prec_.compute(params_);
      const float* master = prec_.master_values(params_);
      const auto y = exec_.forward(ctx_, info, p, upload(x), master);
      double l = 0;
      if constexpr (requires { loss_.forward(y, labels, grad_scale, denominator); })
        l = loss_.forward(y, labels, grad_scale * prec_.loss_factor(), denominator);
      else
        l = loss_.forward(y, labels, grad_scale * prec_.loss_factor()); // NllLoss (make_loss refused options)
      exec_.backward(ctx_, p, grads_, loss_.backward(), {.accumulate = accumulate}, hook, master);
      return l;
    });
  }
  /// (correct predictions, summed loss) over `x` in evaluation mode, in chunks of at most what
  /// training allocated for (eval_chunk: device memory stays at training's). A dense network's
  /// are (correct pixels, the loss summed over the counted pixels, weighted), its predictions
  /// added to `metrics` (required) from the scores copied to the host.
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels, std::uint64_t seed,
                                          SegmentationMetrics* metrics = nullptr) {
    return guarded("evaluation", [&] {
      const StepInfo info{.mode = Mode::eval, .seed = seed, .update_buffers = false};
      const std::size_t chunk = eval_chunk(exec_.capacity(), x.batch(), eval_limit_);
      return detail::evaluate_in_chunks<Net>(
          x, labels, chunk, [&](input_view part, std::span<const std::int32_t> part_labels) {
            const auto y =
                exec_.forward(ctx_, info, prec_.compute(params_), upload(part), prec_.master_values(params_));
            const double l = loss_.forward(y, part_labels);
            scores_.resize(y.size());
            if constexpr (std::is_same_v<compute_type, float>) {
              K::download(ctx_, y.data(), scores_.data(), y.size());
            } else {
              scores_float_.resize(std::max(scores_float_.size(), y.size()));
              K::convert(ctx_, y.data(), scores_float_.data(), y.size());
              K::download(ctx_, scores_float_.data(), scores_.data(), y.size());
            }
            if constexpr (dense_output<Net>) {
              return detail::dense_chunk_result(
                  metrics, ConstBatchView<typename Net::output_shape, float>(scores_.data(), part.batch()), part_labels,
                  l, loss_.denominator(), "DeviceReplica::evaluate");
            } else {
              return std::pair{count_correct<Net>(scores_.data(), part_labels), l};
            }
          });
    });
  }
  /// The optimiser step on this replica's parameters with its (summed) gradients; false when
  /// mixed precision skips it (inf/NaN gradients under fp16 loss scaling).
  bool step() {
    return guarded("the optimiser step", [&] {
      if (!prec_.prepare_step(ctx_, grads_.values.data(), grads_.values.size())) return false;
      opt_.step(std::span<float>(params_.values.data(), params_.values.size()),
                std::span<const float>(grads_.values.data(), grads_.values.size()));
      prec_.after_step(ctx_, params_);
      return true;
    });
  }
  void zero_grad() {
    guarded("zeroing the gradients", [&] { K::fill(ctx_, grads_.values.data(), grads_.values.size(), 0.f); });
  }
  /// Makes this replica's device current on the calling thread (cudaSetDevice on Cuda): before
  /// anything the thread allocates for it, such as the Trainer's page-locked staging buffers.
  void activate() {
    if constexpr (requires { ctx_.activate(); }) ctx_.activate();
  }
  float* gradients() noexcept { return grads_.values.data(); }
  std::size_t size() const noexcept { return params_.values.size(); }
  context& ctx() noexcept { return ctx_; }
  precision_type& precision() noexcept { return prec_; }
  const auto& loss() const noexcept { return loss_; }

  /// Parameters and optimiser state into the host copies (the live running statistics
  /// included), and back.
  template <class HostParams, class HostOpt>
  void to_host(HostParams& host, HostOpt& host_opt) {
    guarded("copying the model to the host", [&] {
      prec_.before_save(ctx_, params_);
      // The stores are copied on the backend's default stream: let the context's stream (where
      // the kernels ran) finish first.
      if constexpr (requires { ctx_.synchronize(); }) ctx_.synchronize();
      state_to_host<Backend>(ctx_, params_, opt_, host, host_opt);
    });
  }
  /// The device optimiser's learning rate (a schedule's).
  void set_lr(double lr) { opt_.set_lr(lr); }
  void set_momentum(double m) { opt_.set_momentum(m); }
  template <class HostParams, class HostOpt>
  void from_host(const HostParams& host, HostOpt& host_opt) {
    guarded("copying the model to the device", [&] {
      state_to_device<Backend>(ctx_, host, host_opt, params_, opt_);
      prec_.after_load(ctx_, params_);
    });
  }
  /// The host parameters and statistics (not the optimiser state) onto the device.
  template <class HostParams>
  void load_parameters(const HostParams& host) {
    guarded("copying the parameters to the device", [&] {
      params_.copy_from(host);
      prec_.after_load(ctx_, params_);
    });
  }

 private:
  /// f() with this replica's device current (every entry point: the caller may have made
  /// another device current since the last call, or be another thread), the backend's own
  /// exceptions (Thrust's) turned into cohort errors naming `what` and the device (the
  /// context's translate_errors).
  template <class F>
  decltype(auto) guarded(const char* what, F&& f) {
    activate();
    if constexpr (requires { ctx_.translate_errors(what, f); })
      return ctx_.translate_errors(what, std::forward<F>(f));
    else
      return std::forward<F>(f)();
  }

  /// The host batch on the device, in the compute type.
  ConstBatchView<typename Net::input_shape, compute_type> upload(input_view x) {
    input_.resize(std::max(input_.size(), x.size()));
    K::upload(ctx_, x.data(), input_.data(), x.size());
    if constexpr (std::is_same_v<compute_type, float>) {
      return {input_.data(), x.batch()};
    } else {
      input_compute_.resize(std::max(input_compute_.size(), x.size()));
      K::convert(ctx_, input_.data(), input_compute_.data(), x.size());
      return {input_compute_.data(), x.batch()};
    }
  }

  using loss_type = default_loss_t<Net, compute_type, Backend>;
  context ctx_;
  Parameters<Net, float, Backend> params_; // the master (what the optimiser updates)
  precision_type prec_;
  Gradients<Net, compute_type, Backend> grads_; // float
  Executor<Net, compute_type, Backend> exec_;
  loss_type loss_;
  typename Backend::template buffer<float> input_;
  typename Backend::template buffer<compute_type> input_compute_; // mixed precision only
  typename Backend::template buffer<float> scores_float_;         // mixed precision only
  std::vector<float> scores_;
  typename device_optimizer<Opt, Backend>::type opt_;
  std::size_t eval_limit_ = 0; // eval_chunk's limit before training sized exec_
};

/// What every device engine keeps around its replicas: the host copies of the parameters and
/// the optimiser (what the Trainer reads and checkpoints hold), refreshed from replica 0 when the
/// devices trained since they were last read, and the Trainer's precision hooks (replica 0's loss
/// scaler state, restored into every replica: all take the same decisions). Derived provides
/// first_replica() and for_each_replica(f).
template <class Derived, class Net, class Opt>
class DeviceEngineBase {
 public:
  using params_type = Parameters<Net, float, Cpu>; // the host copy

  /// The parameters on the host (refreshed from the device if it trained since).
  params_type& parameters() {
    refresh();
    return host_;
  }
  /// The optimiser on the host, with the device's state (checkpoints read its slots).
  Opt& optimizer() {
    refresh();
    return opt_;
  }
  void before_save() { refresh(); }
  /// Makes the first replica's device current on the calling thread (the Trainer's threads
  /// call it before allocating staging memory: page-locked memory opens a context on the
  /// thread's current device, GPU 0 unless set).
  void activate() { self().first_replica().activate(); }
  /// A learning-rate schedule's rate: the host optimiser's and every device's (state untouched).
  void set_lr(double lr) {
    opt_.set_lr(lr);
    self().for_each_replica([&](auto& d) { d.set_lr(lr); });
  }
  /// A schedule's momentum (OneCycleLR): the host optimiser's and every device's.
  void set_momentum(double m) {
    opt_.set_momentum(m);
    self().for_each_replica([&](auto& d) { d.set_momentum(m); });
  }
  /// The host parameters and optimiser state were loaded (or received): every replica takes them.
  void after_load() {
    self().for_each_replica([&](auto& d) { d.from_host(host_, opt_); });
    stale_ = false;
  }

  void export_state(TrainerState& s) { self().first_replica().precision().export_state(s); }
  void import_state(const TrainerState& s) {
    self().for_each_replica([&](auto& d) { d.precision().import_state(s); });
  }
  /// fp16: optimiser steps skipped on inf/NaN gradients so far, and the current loss scale.
  std::uint64_t skipped_steps() { return self().first_replica().precision().skipped_steps(); }
  double loss_scale() { return self().first_replica().precision().scale(); }

 protected:
  DeviceEngineBase(Opt opt, std::uint64_t seed)
      : host_(initialized_parameters<params_type>(seed)), opt_(std::move(opt)) {}
  /// The devices trained: the host copies are out of date.
  void mark_trained() noexcept { stale_ = true; }
  /// Replica 0's parameters, statistics and optimiser state into the host copies.
  void download() {
    self().first_replica().to_host(host_, opt_);
    stale_ = false;
  }
  void refresh() {
    if (stale_) download();
  }

  params_type host_;
  Opt opt_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  bool stale_ = false;
};

} // namespace cohort::detail
