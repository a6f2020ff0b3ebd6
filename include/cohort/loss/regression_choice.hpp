#pragma once
/// \file
/// Which loss a Trainer fits target images with (image-to-image regression: denoising, depth,
/// reconstruction, soft masks), chosen at run time as a torch script picks its criterion:
/// `RegressionOptions` names the loss and its parameter, `detail::ChosenRegressionLoss<T>` is
/// the engines' loss object that dispatches to it.
/// Example (compiled: tests/docs/headers.cpp, "loss/regression_choice"):
///
///     using Denoiser = cohort::models::UNet<cohort::Shape<1, 28, 28>, 1>;   // one output channel
///     cohort::TrainerOptions o{.regression = {.loss = cohort::RegressionLoss::huber, .delta = 0.5}};
///     cohort::Trainer<Denoiser, cohort::Adam<>> trainer(cohort::Adam({.lr = 1e-3}), o);
///     trainer.fit(pairs, /*epochs=*/5, &test_pairs);   // ImagePairDataset<Shape<1, 28, 28>>
///
/// The losses are regression_loss.hpp's and bce_with_logits_loss.hpp's, with their definitions
/// and checks: the mean over every element of the batch.

#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/loss/bce_with_logits_loss.hpp"
#include "cohort/loss/regression_loss.hpp"

namespace cohort {

/// torch's MSELoss, L1Loss, SmoothL1Loss(beta), HuberLoss(delta), BCEWithLogitsLoss(pos_weight).
enum class RegressionLoss { mse, l1, smooth_l1, huber, bce_with_logits };

/// The loss of a dense network trained on target images, and its parameter: `beta` for
/// smooth_l1, `delta` for huber, `pos_weight` (one per output channel, or empty) for
/// bce_with_logits. A parameter the chosen loss does not take must keep its default.
struct RegressionOptions {
  RegressionLoss loss = RegressionLoss::mse;
  double beta = 1.0;
  double delta = 1.0;
  std::vector<float> pos_weight{};
  /// Whether these are the defaults (MSELoss): a network that does not regress refuses others.
  bool plain() const noexcept {
    return loss == RegressionLoss::mse && beta == 1.0 && delta == 1.0 && pos_weight.empty();
  }
};

namespace detail {

inline const char* regression_loss_name(RegressionLoss l) noexcept {
  switch (l) {
  case RegressionLoss::mse:
    return "MSELoss";
  case RegressionLoss::l1:
    return "L1Loss";
  case RegressionLoss::smooth_l1:
    return "SmoothL1Loss";
  case RegressionLoss::huber:
    return "HuberLoss";
  case RegressionLoss::bce_with_logits:
    return "BCEWithLogitsLoss";
  }
  return "an unknown regression loss";
}

/// Whether the loss accepts a target value (finite; in [0, 1] for BCEWithLogitsLoss), and what
/// it expects, for a dataset's check before any step.
inline bool regression_accepts(RegressionLoss l, float t) noexcept {
  return std::isfinite(t) && (l != RegressionLoss::bce_with_logits || (t >= 0 && t <= 1));
}
inline const char* regression_range(RegressionLoss l) noexcept {
  return l == RegressionLoss::bce_with_logits ? BinaryCrossEntropy::range : FiniteTarget::range;
}

/// The loss RegressionOptions names, over outputs of storage type T and shape `Out`: built (and
/// its parameter checked, against Out's channels too) when a Trainer is constructed.
template <class T, ShapeType Out>
class ChosenRegressionLoss {
 public:
  explicit ChosenRegressionLoss(const RegressionOptions& o = {}) : loss_(make(o)), kind_(o.loss) {}

  /// The mean loss of `y` against one target per element, and its gradient times `grad_scale`.
  double forward(ConstBatchView<Out, T> y, std::span<const float> targets, double grad_scale = 1.0) {
    return std::visit([&](auto& l) { return l.forward(y, targets, grad_scale); }, loss_);
  }
  LossGradient<T> backward() const noexcept {
    return std::visit([](const auto& l) { return l.backward(); }, loss_);
  }
  const char* name() const noexcept { return regression_loss_name(kind_); }
  RegressionLoss kind() const noexcept { return kind_; }

 private:
  using variant_type = std::variant<MSELoss<T>, L1Loss<T>, SmoothL1Loss<T>, HuberLoss<T>, BCEWithLogitsLoss<T>>;

  static variant_type make(const RegressionOptions& o) {
    const RegressionOptions defaults;
    const auto unused = [&](bool given, const char* what) {
      if (given)
        throw ValueError(concat("Trainer: RegressionOptions::", what, " was set, but the chosen loss is ",
                                regression_loss_name(o.loss), ", which does not take it"));
    };
    if (o.loss != RegressionLoss::smooth_l1) unused(o.beta != defaults.beta, "beta (SmoothL1Loss's)");
    if (o.loss != RegressionLoss::huber) unused(o.delta != defaults.delta, "delta (HuberLoss's)");
    if (o.loss != RegressionLoss::bce_with_logits) unused(!o.pos_weight.empty(), "pos_weight (BCEWithLogitsLoss's)");
    switch (o.loss) {
    case RegressionLoss::mse:
      return MSELoss<T>{};
    case RegressionLoss::l1:
      return L1Loss<T>{};
    case RegressionLoss::smooth_l1:
      return SmoothL1Loss<T>({.beta = o.beta});
    case RegressionLoss::huber:
      return HuberLoss<T>({.delta = o.delta});
    case RegressionLoss::bce_with_logits: {
      BCEWithLogitsLoss<T> bce({.pos_weight = o.pos_weight});
      bce.rule().template check<Out>(); // pos_weight's count against the output's channels, now
      return bce;
    }
    }
    throw ValueError(concat("Trainer: RegressionOptions::loss is ", int(o.loss), ", not a RegressionLoss"));
  }

  variant_type loss_;
  RegressionLoss kind_;
};

} // namespace detail
} // namespace cohort
