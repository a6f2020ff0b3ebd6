#pragma once
/// \file
/// `MixedPrecision<fp16>` and `MixedPrecision<bf16>`: Apex O2 as a precision policy.
/// Example (not compiled: its second trainer needs MPI (cohort/mpi.hpp)):
///
///     cohort::Trainer<Net, cohort::Adam<>, cohort::SingleDevice<>, cohort::MixedPrecision<cohort::fp16>> t(opt);
///     cohort::Trainer<Net, cohort::Adam<>, cohort::ProcessGroupDDP<cohort::Mpi>, cohort::MixedPrecision<cohort::bf16>>
///     d(opt);
///
/// Weights and activations are stored in 16 bits for forward and backward; every dot product
/// and reduction accumulates in float; parameter gradients, the master weights and the
/// optimiser state are float; BatchNorm computes in float from the float master weights and the
/// loss in float. fp16 multiplies the loss by a dynamic scale (torch.cuda.amp.GradScaler's
/// semantics and defaults) so small gradients do not underflow; bf16 has float's exponent range
/// and needs none.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/core/error.hpp"
#include "cohort/precision/half.hpp"

namespace cohort {

/// No loss scaling (bf16, or fp16 by explicit choice).
struct NoLossScale {
  static constexpr std::string_view name = "none";
};
/// Dynamic loss scaling: GradScaler's algorithm (LossScaleOptions holds its settings).
struct DynamicLossScale {
  static constexpr std::string_view name = "dynamic";
};

namespace detail {
template <class H>
using default_loss_scale = std::conditional_t<std::is_same_v<H, half>, DynamicLossScale, NoLossScale>;
}

/// `MixedPrecision<H, LossScale = DynamicLossScale for fp16, NoLossScale for bf16>`.
template <class H, class LossScale = detail::default_loss_scale<H>>
struct MixedPrecision {
  static_assert(!std::is_same_v<H, float> && !std::is_same_v<H, double>,
                "MixedPrecision<H>: float and double are not mixed precision; use FullPrecision");
  static_assert(HalfType<H>, "MixedPrecision<H>: H must be cohort::fp16 (IEEE half) or cohort::bf16 (bfloat16)");
  static_assert(std::is_same_v<LossScale, NoLossScale> || std::is_same_v<LossScale, DynamicLossScale>,
                "MixedPrecision<H, LossScale>: LossScale must be cohort::DynamicLossScale or cohort::NoLossScale");
  static_assert(!(std::is_same_v<H, bfloat16> && std::is_same_v<LossScale, DynamicLossScale>),
                "MixedPrecision<bf16, DynamicLossScale>: bf16 has float's exponent range and needs no loss scaling; "
                "use MixedPrecision<bf16>");
  using compute_type = H;
  using loss_scale = LossScale;
  static constexpr std::string_view name = H::name;
  static constexpr bool scales_loss = std::is_same_v<LossScale, DynamicLossScale>;
};

/// Settings of dynamic loss scaling: PyTorch's GradScaler defaults, plus what users ask for and
/// GradScaler lacks (a floor on the scale, an error after too many skipped steps in a row).
struct LossScaleOptions {
  double init_scale = 65536.0; // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::uint64_t growth_interval = 2000; // clean steps before the scale grows
  /// The scale never drops below this (GradScaler has no floor).
  double min_scale = 1.0;
  /// Fail (NumericError) after this many consecutive skipped steps; 0: never.
  std::uint64_t max_consecutive_skips = 50;
};

/// Training cannot go on numerically: e.g. every step overflows in fp16.
class NumericError : public Error {
 public:
  using Error::Error;
};

/// GradScaler's state machine. Per step: the loss is multiplied by scale(); the gradients are
/// then checked and unscaled; `update(found_inf)` skips or grows/backs off as GradScaler does.
class LossScaler {
 public:
  LossScaler() = default;
  explicit LossScaler(const LossScaleOptions& o) : o_(o), scale_(float(o.init_scale)) {
    if (!(o.init_scale > 0) || !(o.growth_factor > 1) || !(o.backoff_factor > 0 && o.backoff_factor < 1) ||
        o.growth_interval == 0 || !(o.min_scale > 0))
      throw ValueError(detail::concat("loss scaling: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
                                      "growth_interval > 0 and min_scale > 0; got ",
                                      o.init_scale, ", ", o.growth_factor, ", ", o.backoff_factor, ", ",
                                      o.growth_interval, ", ", o.min_scale));
  }

  /// The factor on the loss this step (float, as GradScaler keeps it).
  float scale() const noexcept { return scale_; }
  /// What the gradients are multiplied by: float(1 / double(scale)), GradScaler's inv_scale.
  float inverse() const noexcept { return float(1.0 / double(scale_)); }

  /// After the gradients were checked: `found_inf` skips the step and backs off (not below
  /// min_scale); otherwise every growth_interval clean steps in a row grow the scale. Throws
  /// NumericError after max_consecutive_skips skipped steps in a row.
  void update(bool found_inf) {
    if (found_inf) {
      scale_ = std::max(float(double(scale_) * o_.backoff_factor), float(o_.min_scale));
      growth_tracker_ = 0;
      ++skipped_;
      ++consecutive_;
      if (o_.max_consecutive_skips && consecutive_ >= o_.max_consecutive_skips)
        throw NumericError(
            detail::concat("fp16 loss scaling: ", consecutive_, " steps in a row had inf/NaN gradients (scale now ",
                           scale_, ", floor ", o_.min_scale,
                           "); the model diverged or does not fit fp16: lower the learning rate, or train "
                           "in bf16 or fp32"));
      return;
    }
    consecutive_ = 0;
    if (++growth_tracker_ == o_.growth_interval) {
      const float grown = float(double(scale_) * o_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    }
  }

  std::uint64_t skipped() const noexcept { return skipped_; }
  std::uint64_t growth_tracker() const noexcept { return growth_tracker_; }
  std::uint64_t consecutive_skips() const noexcept { return consecutive_; }
  const LossScaleOptions& options() const noexcept { return o_; }
  /// For checkpoints: the whole state.
  void restore(float scale, std::uint64_t growth_tracker, std::uint64_t skipped, std::uint64_t consecutive) noexcept {
    scale_ = scale;
    growth_tracker_ = growth_tracker;
    skipped_ = skipped;
    consecutive_ = consecutive;
  }

 private:
  LossScaleOptions o_{};
  float scale_ = 65536.f;
  std::uint64_t growth_tracker_ = 0, skipped_ = 0, consecutive_ = 0;
};

} // namespace cohort
