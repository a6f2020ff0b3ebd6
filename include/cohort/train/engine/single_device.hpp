#pragma once
/// \file
/// The engine of `SingleDevice<Cpu>` + `FullPrecision`: one network, one optimiser.
///
///     cohort::Trainer<Net, cohort::Adam<>> trainer(cohort::Adam({.lr = 1e-3}));   // uses it

#include <cstddef>
#include <span>
#include <utility>

#include "cohort/network/network.hpp"
#include "cohort/parallel/single_device.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/engine/engine.hpp"

namespace cohort::detail {

template <class Net, class Opt>
class TrainEngine<SingleDevice<Cpu>, FullPrecision, Net, Opt> : public LocalCollectives {
 public:
  using network_type = Network<Net, float, Cpu>;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o) : net_(o.seed), opt_(std::move(opt)) {}

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    net_.train();
    net_.set_step(m.forward_pass);
    // Each micro-batch contributes its mean gradient / count: the step sees their average.
    const double l = loss_.forward(net_.forward(x), labels, 1.0 / double(m.count));
    net_.backward(loss_.backward(), {.accumulate = m.index > 0});
    if (m.last()) opt_.step(net_);
    return l;
  }

  /// (correct predictions, summed loss) over the batch, in evaluation mode.
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels) {
    net_.eval();
    const auto y = net_.forward(x);
    const double l = loss_.forward(y, labels);
    net_.train();
    return {count_correct<Net>(y.data(), labels), l * double(x.batch())};
  }

  network_type& network() noexcept { return net_; }
  typename network_type::params_type& parameters() noexcept { return net_.parameters(); }
  Opt& optimizer() noexcept { return opt_; }
  std::size_t devices() const noexcept { return 1; }
  void set_seed(std::uint64_t seed) noexcept { net_.set_seed(seed); }

 private:
  network_type net_;
  Opt opt_;
  default_loss_t<Net> loss_;
};

} // namespace cohort::detail
