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
/// the device through after_load(). Under MixedPrecision<fp16|bf16> a 16-bit copy of the
/// weights computes on the device (train/engine/device_precision.hpp).

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
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"

namespace cohort::detail {

template <class Backend, class Precision, class Net, class Opt>
requires(!host_memory_backend<Backend> &&
         known_precision<Precision>) class TrainEngine<SingleDevice<Backend>, Precision, Net, Opt>
    : public LocalCollectives,
      public DeviceEngineBase<TrainEngine<SingleDevice<Backend>, Precision, Net, Opt>, Net, Opt> {
  using base = DeviceEngineBase<TrainEngine, Net, Opt>;
  friend base;

 public:
  using typename base::params_type;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : base(std::move(opt), o.seed), seed_(o.seed),
        // The context first makes the device current: the replica's members allocate on it.
        replica_(this->opt_, device_context<typename Backend::context>(o.parallel.device, o.parallel), o.loss_scale,
                 o.loss, o.frozen, o.eval_chunk, o.ignore_index) {
    replica_.load_parameters(this->host_);
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    // Each micro-batch contributes its mean gradient / count: the step sees their average.
    const double l = replica_.train(train_step_info(seed_, m), x, labels, 1.0 / double(m.count), m.index > 0);
    if (m.last()) {
      replica_.step();
      this->mark_trained();
    }
    return l;
  }

  /// (correct predictions, summed loss) over the batch, in evaluation mode (a dense network's
  /// predictions added to `metrics`).
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    return replica_.evaluate(x, labels, seed_, metrics);
  }

  std::size_t devices() const noexcept { return 1; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  typename Backend::context& context() noexcept { return replica_.ctx(); }

 private:
  DeviceReplica<Net, Backend, Opt, Precision>& first_replica() noexcept { return replica_; }
  template <class F>
  void for_each_replica(F&& f) {
    f(replica_);
  }

  std::uint64_t seed_;
  DeviceReplica<Net, Backend, Opt, Precision> replica_;
};

} // namespace cohort::detail
