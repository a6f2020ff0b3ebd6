#pragma once
/// \file
/// Binary cross-entropy on logits, torch.nn.BCEWithLogitsLoss (mean reduction), with pos_weight:
/// binary and multi-label segmentation (a mask per channel), multi-label classification.
/// Example (compiled: tests/docs/headers.cpp, "loss/bce_with_logits_loss"):
///
///     cohort::BCEWithLogitsLoss bce({.pos_weight = {3.0f}});    // one mask channel, positives 3x
///     double l = bce.forward(net.forward(x), masks);             // masks: N * 1 * H * W in [0, 1]
///     net.backward(bce.backward());
///
/// Per element with logit x, target y and the element's channel's positive weight p:
///
///     -[p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))]
///       = (1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))      (torch's stable form)
///
/// averaged over every element. pos_weight has one value per channel (the first axis of the
/// sample shape), as torch's pos_weight of shape (C, 1, 1) on (N, C, H, W) inputs, or (C,) on
/// (N, C); empty: every weight 1. Targets must lie in [0, 1] (soft labels allowed): torch
/// accepts others silently, which gives a loss with no meaning, so cohort names the sample and
/// element instead. Host-memory backends (the CPU).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/loss/detail/elementwise_loss.hpp"

namespace cohort {

/// BCEWithLogitsLoss's option: torch's pos_weight, one per channel.
struct BCEWithLogitsOptions {
  std::vector<float> pos_weight{}; // empty: every channel weighs its positives 1
};

namespace detail {
struct BinaryCrossEntropy {
  static constexpr const char* name = "BCEWithLogitsLoss";
  static constexpr const char* range = "a value in [0, 1]";
  BCEWithLogitsOptions o;

  static constexpr bool accepts(float t) noexcept { return t >= 0 && t <= 1; }
  template <class S>
  void check() const {
    if (!o.pos_weight.empty() && o.pos_weight.size() != S::extents[0])
      throw ShapeError(concat("BCEWithLogitsLoss: ", o.pos_weight.size(), " pos_weight values for an input of ",
                              S::extents[0], " channels, expected one per channel"));
  }
  double weight(std::size_t channel) const noexcept {
    return o.pos_weight.empty() ? 1.0 : double(o.pos_weight[channel]);
  }
  double value(double x, double y, std::size_t channel) const noexcept {
    const double l = 1 + (weight(channel) - 1) * y;
    return (1 - y) * x + l * (std::log1p(std::exp(-std::abs(x))) + std::max(-x, 0.0));
  }
  double derivative(double x, double y, std::size_t channel) const noexcept {
    const double p = weight(channel);
    const double s = x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); // sigmoid, stably
    return s * (1 + (p - 1) * y) - p * y;
  }
};
} // namespace detail

/// `BCEWithLogitsLoss<T = float>`: the mean binary cross-entropy of sigmoid(input) against
/// targets in [0, 1], positives weighted per channel. Throws ValueError for a negative or
/// non-finite pos_weight; its count is checked against the input's channels at forward.
template <class T = float>
class BCEWithLogitsLoss : public detail::ElementwiseLoss<T, detail::BinaryCrossEntropy> {
 public:
  BCEWithLogitsLoss() = default;
  explicit BCEWithLogitsLoss(BCEWithLogitsOptions o)
      : detail::ElementwiseLoss<T, detail::BinaryCrossEntropy>(detail::BinaryCrossEntropy{checked(std::move(o))}) {}
  const BCEWithLogitsOptions& options() const noexcept { return this->rule().o; }

 private:
  static BCEWithLogitsOptions checked(BCEWithLogitsOptions o) {
    for (std::size_t c = 0; c < o.pos_weight.size(); ++c)
      if (!(o.pos_weight[c] >= 0) || !std::isfinite(o.pos_weight[c]))
        throw ValueError(detail::concat("BCEWithLogitsLoss: pos_weight of channel ", c, " is ", o.pos_weight[c],
                                        ", expected a finite value >= 0"));
    return o;
  }
};

} // namespace cohort
