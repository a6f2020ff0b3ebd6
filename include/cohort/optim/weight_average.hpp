#pragma once
/// \file
/// An exponential moving average of a network's weights, running statistics and counters:
/// torch's `AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)`
/// and its `update_parameters(model)`, element for element. Evaluating the average instead of
/// the last weights is one of the cheapest accuracy gains in short training runs (airbench's
/// ablations; torchvision's reference recipes).
/// Example (compiled: tests/docs/headers.cpp, "optim/weight_average"):
///
///     cohort::Network<Net> net(0);
///     cohort::WeightAverage<Net> ema({.decay = 0.99});
///     // ... after each optimiser step:
///     ema.update(net.parameters());
///     // ema.parameters(): the averaged state_dict, to evaluate, predict with or save
///
/// What torch computes, cohort computes: the first update copies every tensor; later ones move
/// each float tensor toward the model's by w = 1 - decay as torch.lerp does on the CPU
/// (fma(w, model - ema, ema) for |w| < 0.5, fma(w - 1, model - ema, model) otherwise, in
/// float), and each integer counter (BatchNorm's num_batches_tracked) to
/// trunc(float(ema) * float(decay) + float(model) * float(1 - decay)), torch's
/// `p_ema.copy_(p_ema * decay + p_model * (1 - decay))` for integer tensors.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/core/error.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/optim/detail/torch_lerp.hpp"
#include "cohort/optim/ema_options.hpp"

namespace cohort {

template <ChainDescription Net>
class WeightAverage {
 public:
  using params_type = Parameters<Net, float, Cpu>;

  explicit WeightAverage(const EmaOptions& o = {}) : options_(o) {
    if (!(o.decay >= 0.0 && o.decay <= 1.0))
      throw ValueError(
          detail::concat("WeightAverage: decay must be in [0, 1] (torch's get_ema_multi_avg_fn), got ", o.decay));
    if (o.every == 0) throw ValueError("WeightAverage: every must be at least 1 (update after every n-th step)");
  }

  const EmaOptions& options() const noexcept { return options_; }
  /// How many updates the average holds (torch's n_averaged).
  std::uint64_t n_averaged() const noexcept { return n_averaged_; }
  /// The averaged weights, running statistics and counters (the network's state_dict layout).
  const params_type& parameters() const noexcept { return average_; }
  params_type& parameters() noexcept { return average_; }
  /// Sets the count (a checkpoint's); the tensors are set through parameters().
  void set_n_averaged(std::uint64_t n) noexcept { n_averaged_ = n; }

  /// torch's update_parameters(model).
  void update(const params_type& model) {
    if (n_averaged_ == 0) {
      average_.copy_from(model);
    } else {
      const float w = float(1.0 - options_.decay);
      detail::torch_lerp(average_.values.data(), model.values.data(), average_.values.size(), w);
      detail::torch_lerp(average_.buffers.data(), model.buffers.data(), average_.buffers.size(), w);
      const float d = float(options_.decay);
      std::int64_t* e = average_.counters.data();
      const std::int64_t* m = model.counters.data();
      for (std::size_t i = 0; i < average_.counters.size(); ++i)
        e[i] = static_cast<std::int64_t>(float(e[i]) * d + float(m[i]) * w);
    }
    ++n_averaged_;
  }

 private:
  EmaOptions options_;
  params_type average_{};
  std::uint64_t n_averaged_ = 0;
};

} // namespace cohort
