#pragma once
/// \file
/// The engine of `SingleDevice<B>` for a device backend B (`ThrustDevice`, `Cuda`): parameters,
/// gradients, activations and the optimiser's state stay in device memory; each step uploads the
/// batch, and the optimiser's element rule runs as a device kernel (optim/ rules are host and
/// device code).
///
///     cohort::Trainer<Net, cohort::Adam<>, cohort::SingleDevice<cohort::Cuda>> trainer(opt, options);
///
/// The Trainer's `parameters()` and `optimizer()` are host copies (what checkpoints read and
/// write): they are refreshed from the device when accessed after training, and a load reaches
/// the device through after_load(). Full precision only (mixed precision on a device backend
/// is not implemented).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/loss/loss.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/single_device.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"

namespace cohort::detail {

template <class Backend, class Net, class Opt>
requires(!host_memory_backend<Backend>) class TrainEngine<SingleDevice<Backend>, FullPrecision, Net, Opt>
    : public LocalCollectives, public FullPrecisionHooks {
  static_assert(
      requires { typename Opt::template rebind_backend<Backend>; },
      "Trainer: on a device backend the optimiser must be Sgd<>, Adam<> or Adadelta<> (an optimiser with "
      "rebind_backend; OptimizerVariant is host-only)");
  using device_opt = typename Opt::template rebind_backend<Backend>;
  using K = ops::ElementwiseKernels<Backend>;

 public:
  using params_type = Parameters<Net, float, Cpu>; // the host copy
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      // ctx_ first: it makes the device current before the device members allocate on it.
      : seed_(o.seed), ctx_(make_context(o.parallel.device)), host_(initialized_parameters<params_type>(o.seed)),
        opt_(std::move(opt)), dev_opt_(opt_.options()) {
    dev_opt_.set_context(ctx_);
    loss_.set_context(ctx_);
    params_.copy_from(host_);
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    const StepInfo info = train_step_info(seed_, m);
    const auto y = exec_.forward(ctx_, info, params_, upload(x));
    // Each micro-batch contributes its mean gradient / count: the step sees their average.
    const double l = loss_.forward(y, labels, 1.0 / double(m.count));
    exec_.backward(ctx_, params_, grads_, loss_.backward(), {.accumulate = m.index > 0});
    if (m.last()) {
      dev_opt_.step(std::span<float>(params_.values.data(), params_.values.size()),
                    std::span<const float>(grads_.values.data(), grads_.values.size()));
      host_stale_ = true;
    }
    return l;
  }

  /// (correct predictions, summed loss) over the batch, in evaluation mode.
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels) {
    const StepInfo info{.mode = Mode::eval, .seed = seed_, .update_buffers = false};
    const auto y = exec_.forward(ctx_, info, params_, upload(x));
    const double l = loss_.forward(y, labels);
    scores_.resize(y.size());
    K::download(ctx_, y.data(), scores_.data(), y.size());
    return {count_correct<Net>(scores_.data(), labels), l * double(x.batch())};
  }

  /// The parameters on the host (refreshed from the device if it trained since).
  params_type& parameters() {
    if (host_stale_) download();
    return host_;
  }
  /// The optimiser on the host, with the device's state (checkpoints read its slots).
  Opt& optimizer() {
    if (host_stale_) download();
    return opt_;
  }
  std::size_t devices() const noexcept { return 1; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  typename Backend::context& context() noexcept { return ctx_; }

  // The Trainer's precision hooks (full precision: only the host/device copies matter).
  void before_save() {
    if (host_stale_) download();
  }
  /// The host parameters and optimiser state were loaded: they replace the device's.
  void after_load() {
    state_to_device<Backend>(ctx_, host_, opt_, params_, dev_opt_);
    host_stale_ = false;
  }

 private:
  static typename Backend::context make_context(int device) {
    typename Backend::context ctx{};
    if constexpr (requires { ctx.device; }) ctx.device = device;
    if constexpr (requires { ctx.activate(); }) ctx.activate(); // e.g. cudaSetDevice
    return ctx;
  }
  ConstBatchView<typename Net::input_shape, float> upload(input_view x) {
    input_.resize(std::max(input_.size(), x.size()));
    K::upload(ctx_, x.data(), input_.data(), x.size());
    return {input_.data(), x.batch()};
  }
  void download() {
    state_to_host<Backend>(ctx_, params_, dev_opt_, host_, opt_);
    host_stale_ = false;
  }

  std::uint64_t seed_;
  typename Backend::context ctx_{};
  params_type host_;
  Parameters<Net, float, Backend> params_;
  Gradients<Net, float, Backend> grads_;
  Executor<Net, float, Backend> exec_;
  default_loss_t<Net, float, Backend> loss_;
  typename Backend::template buffer<float> input_;
  std::vector<float> scores_;
  Opt opt_;
  device_opt dev_opt_;
  bool host_stale_ = false;
};

} // namespace cohort::detail
