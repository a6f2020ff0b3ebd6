#pragma once
/// \file
/// The engine of `SingleDevice<Cpu>`: one network instance, one optimiser, any precision policy.
///
///     cohort::Trainer<Net, cohort::Adam<>> trainer(cohort::Adam({.lr = 1e-3}));   // uses it

#include <cstddef>
#include <span>
#include <utility>

#include "cohort/parallel/single_device.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/precision_state.hpp"

namespace cohort::detail {

template <class Precision, class Net, class Opt>
requires known_precision<Precision>
class TrainEngine<SingleDevice<Cpu>, Precision, Net, Opt>
    : public LocalCollectives, public PrecisionHooks<TrainEngine<SingleDevice<Cpu>, Precision, Net, Opt>> {
 public:
  using params_type = Parameters<Net, float, Cpu>;
  using compute_type = typename PrecisionState<Precision, Net>::compute_type;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : seed_(o.seed), master_(initialized_parameters<params_type>(o.seed)), prec_(master_, o.loss_scale),
        replica_(ThreadPool::global(), o.loss, o.frozen, o.eval_chunk, o.ignore_index, o.regression, o.tta),
        opt_(std::move(opt)) {}

  /// `labels`: class labels or masks (int32), or a dense network's float regression targets (one
  /// per output element).
  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) { return step_on(x, labels, m); }
  double step(input_view x, std::span<const float> targets, const MicroStep& m) { return step_on(x, targets, m); }
  template <TargetElement L>
  double step_on(input_view x, std::span<const L> labels, const MicroStep& m) {
    const StepInfo info = train_step_info(seed_, m);
    // Each micro-batch contributes its mean gradient / count: the step sees their average.
    auto& g = replica_.gradients();
    const double l = replica_.train(prec_.compute(), g, x, labels, info, prec_.loss_factor() / double(m.count),
                                    m.index > 0, NoHook{}, prec_.master_values());
    if (m.last() && prec_.prepare_step(ThreadPool::global(), g.values.span())) {
      opt_.step(master_.values.span(), std::span<const float>(g.values.data(), g.values.size()));
      prec_.after_step(ThreadPool::global());
    }
    return l;
  }

  /// (correct predictions, summed loss) over the batch, in evaluation mode (a dense network's
  /// predictions added to `metrics`).
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    return evaluate_on(x, labels, metrics);
  }
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const float> targets) {
    return evaluate_on(x, targets, nullptr);
  }
  template <TargetElement L>
  std::pair<std::size_t, double> evaluate_on(input_view x, std::span<const L> labels, SegmentationMetrics* metrics) {
    return replica_.evaluate(prec_.compute(), x, labels, seed_, prec_.master_values(), metrics);
  }

  params_type& parameters() noexcept { return master_; }
  Opt& optimizer() noexcept { return opt_; }
  std::size_t devices() const noexcept { return 1; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  PrecisionState<Precision, Net>& precision() noexcept { return prec_; }
  Replica<Net, compute_type>& replica() noexcept { return replica_; }

 private:
  std::uint64_t seed_;
  params_type master_;
  PrecisionState<Precision, Net> prec_;
  Replica<Net, compute_type> replica_;
  Opt opt_;
};

} // namespace cohort::detail
