#pragma once
/// \file
/// The regression losses of image-to-image work (denoising, depth, reconstruction), torch's
/// definitions with mean reduction: MSELoss, L1Loss, SmoothL1Loss (beta) and HuberLoss (delta),
/// over inputs of any shape and one float target per element.
/// Example (compiled: tests/docs/headers.cpp, "loss/regression_loss"):
///
///     cohort::MSELoss mse;                                       // torch.nn.MSELoss()
///     double l = mse.forward(net.forward(noisy), clean);         // clean: N * C * H * W floats
///     net.backward(mse.backward());
///     cohort::HuberLoss huber({.delta = 0.5});                   // torch.nn.HuberLoss(delta=0.5)
///
/// With d = input - target, per element:
///
///     MSELoss        d^2
///     L1Loss         |d|                                          (gradient sign(d), 0 at d = 0)
///     SmoothL1Loss   0.5 d^2 / beta  if |d| < beta,  else |d| - 0.5 beta      (beta = 0: L1Loss)
///     HuberLoss      0.5 d^2         if |d| < delta, else delta (|d| - 0.5 delta)
///
/// averaged over every element of the batch. Non-finite targets are a ValueError naming the
/// sample and element, before anything is computed. Host-memory backends (the CPU).

#include <cmath>
#include <cstddef>

#include "cohort/core/error.hpp"
#include "cohort/loss/detail/elementwise_loss.hpp"

namespace cohort {

namespace detail {
inline double sign_of(double d) noexcept { return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0; }

/// The rules: any finite target.
struct FiniteTarget : NoShapeCheck {
  static constexpr const char* range = "a finite value";
  static constexpr bool accepts(float) noexcept { return true; }
};
struct SquaredError : FiniteTarget {
  static constexpr const char* name = "MSELoss";
  static double value(double x, double t, std::size_t) noexcept { return (x - t) * (x - t); }
  static double derivative(double x, double t, std::size_t) noexcept { return 2 * (x - t); }
};
struct AbsoluteError : FiniteTarget {
  static constexpr const char* name = "L1Loss";
  static double value(double x, double t, std::size_t) noexcept { return std::abs(x - t); }
  static double derivative(double x, double t, std::size_t) noexcept { return sign_of(x - t); }
};
} // namespace detail

/// SmoothL1Loss's option: torch's beta (>= 0; 0 is L1Loss).
struct SmoothL1Options {
  double beta = 1.0;
};
/// HuberLoss's option: torch's delta (> 0).
struct HuberOptions {
  double delta = 1.0;
};

namespace detail {
struct SmoothL1Error : FiniteTarget {
  static constexpr const char* name = "SmoothL1Loss";
  SmoothL1Options o;
  double value(double x, double t, std::size_t) const noexcept {
    const double d = std::abs(x - t);
    return o.beta > 0 && d < o.beta ? 0.5 * d * d / o.beta : d - 0.5 * o.beta;
  }
  double derivative(double x, double t, std::size_t) const noexcept {
    const double d = x - t;
    return o.beta > 0 && std::abs(d) < o.beta ? d / o.beta : sign_of(d);
  }
};
struct HuberError : FiniteTarget {
  static constexpr const char* name = "HuberLoss";
  HuberOptions o;
  double value(double x, double t, std::size_t) const noexcept {
    const double d = std::abs(x - t);
    return d < o.delta ? 0.5 * d * d : o.delta * (d - 0.5 * o.delta);
  }
  double derivative(double x, double t, std::size_t) const noexcept {
    const double d = x - t;
    return std::abs(d) < o.delta ? d : o.delta * sign_of(d);
  }
};
} // namespace detail

/// `MSELoss<T = float>`: torch.nn.MSELoss(), the mean of (input - target)^2.
template <class T = float>
class MSELoss : public detail::ElementwiseLoss<T, detail::SquaredError> {};

/// `L1Loss<T = float>`: torch.nn.L1Loss(), the mean of |input - target|.
template <class T = float>
class L1Loss : public detail::ElementwiseLoss<T, detail::AbsoluteError> {};

/// `SmoothL1Loss<T = float>`: torch.nn.SmoothL1Loss(beta). Throws ValueError for a negative or
/// non-finite beta.
template <class T = float>
class SmoothL1Loss : public detail::ElementwiseLoss<T, detail::SmoothL1Error> {
 public:
  SmoothL1Loss() = default;
  explicit SmoothL1Loss(SmoothL1Options o)
      : detail::ElementwiseLoss<T, detail::SmoothL1Error>(detail::SmoothL1Error{{}, checked(o)}) {}

 private:
  static SmoothL1Options checked(SmoothL1Options o) {
    if (!(o.beta >= 0) || !std::isfinite(o.beta))
      throw ValueError(detail::concat("SmoothL1Loss: beta is ", o.beta, ", expected a finite value >= 0"));
    return o;
  }
};

/// `HuberLoss<T = float>`: torch.nn.HuberLoss(delta). Throws ValueError for a delta that is not
/// positive and finite.
template <class T = float>
class HuberLoss : public detail::ElementwiseLoss<T, detail::HuberError> {
 public:
  HuberLoss() = default;
  explicit HuberLoss(HuberOptions o)
      : detail::ElementwiseLoss<T, detail::HuberError>(detail::HuberError{{}, checked(o)}) {}

 private:
  static HuberOptions checked(HuberOptions o) {
    if (!(o.delta > 0) || !std::isfinite(o.delta))
      throw ValueError(detail::concat("HuberLoss: delta is ", o.delta, ", expected a finite value > 0"));
    return o;
  }
};

} // namespace cohort
