#pragma once
/// \file
/// What a precision policy adds to a device replica: the device twin of PrecisionState
/// (precision_state.hpp), with the same rules. The float master parameters (what the optimiser
/// updates and checkpoints hold) and float gradients live on the device. Under
/// `MixedPrecision<H, S>` a 16-bit copy of the weights computes forward and backward (refreshed
/// by a conversion kernel after every optimiser step; it also holds the live running
/// statistics, which BatchNorm keeps in float), and for fp16 a LossScaler on the host: the loss
/// is multiplied by the scale, the summed gradients are checked for inf/NaN on the device and
/// unscaled, and the step is skipped on overflow. Every replica and rank checks the same summed
/// gradients, so all take the same decision.

#include <algorithm>
#include <cstdint>

#include "cohort/backend/ops.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/precision_state.hpp"

namespace cohort::detail {

template <class Precision, class Net, class Backend>
class DevicePrecision;

/// float everywhere: the master parameters compute.
template <class Net, class Backend>
class DevicePrecision<FullPrecision, Net, Backend> {
 public:
  using compute_type = float;
  using master_type = Parameters<Net, float, Backend>;

  DevicePrecision(const LossScaleOptions&) {}
  master_type& compute(master_type& master) noexcept { return master; }
  const float* master_values(const master_type&) const noexcept { return nullptr; }
  double loss_factor() const noexcept { return 1.0; }
  /// Whether the optimiser may step on the summed gradients: always.
  template <class Ctx>
  bool prepare_step(Ctx&, float*, std::size_t) {
    return true;
  }
  template <class Ctx>
  void after_step(Ctx&, master_type&) {}
  template <class Ctx>
  void before_save(Ctx&, master_type&) {}
  template <class Ctx>
  void after_load(Ctx&, master_type&) {}
  void export_state(TrainerState&) const {}
  void import_state(const TrainerState&) {}
  std::uint64_t skipped_steps() const noexcept { return 0; }
  double scale() const noexcept { return 0; }
};

/// 16-bit weights for forward and backward, float master weights and gradients.
template <class Net, class Backend, class H, class S>
class DevicePrecision<MixedPrecision<H, S>, Net, Backend> : public LossScaling<MixedPrecision<H, S>::scales_loss> {
  using K = ops::ElementwiseKernels<Backend>;
  using scaling = LossScaling<MixedPrecision<H, S>::scales_loss>;
  using scaling::scaler_;

 public:
  using compute_type = H;
  using master_type = Parameters<Net, float, Backend>;
  using scaling::scaled;

  explicit DevicePrecision(const LossScaleOptions& o) : scaling(o) {}

  Parameters<Net, H, Backend>& compute(master_type&) noexcept { return compute_; }
  /// BatchNorm reads its float weights here (Apex O2 keeps BatchNorm in fp32).
  const float* master_values(const master_type& master) const noexcept { return master.values.data(); }

  /// fp16: checks the summed gradients for inf/NaN and unscales them; returns false (and backs
  /// the scale off) when the step must be skipped. bf16: nothing to do.
  template <class Ctx>
  bool prepare_step(Ctx& ctx, float* grads, std::size_t n) {
    if constexpr (!scaled) {
      return true;
    } else {
      const bool finite = K::unscale_if_finite(ctx, grads, n, scaler_.inverse());
      scaler_.update(!finite); // may throw NumericError after too many skips in a row
      return finite;
    }
  }
  /// The 16-bit copy follows the master weights.
  template <class Ctx>
  void after_step(Ctx& ctx, master_type& master) {
    K::convert(ctx, master.values.data(), compute_.values.data(), master.values.size());
  }
  /// The running statistics live in the compute copy: into the master for saving.
  template <class Ctx>
  void before_save(Ctx& ctx, master_type& master) {
    K::copy(ctx, compute_.buffers.data(), master.buffers.data(), master.buffers.size());
    std::copy(compute_.counters.begin(), compute_.counters.end(), master.counters.begin());
  }
  /// After the master changed wholesale (start, checkpoint, broadcast): everything follows it.
  template <class Ctx>
  void after_load(Ctx& ctx, master_type& master) {
    K::copy(ctx, master.buffers.data(), compute_.buffers.data(), master.buffers.size());
    std::copy(master.counters.begin(), master.counters.end(), compute_.counters.begin());
    after_step(ctx, master);
  }

 private:
  Parameters<Net, H, Backend> compute_;
};

} // namespace cohort::detail
