#pragma once
/// \file
/// The few math functions device functors need, callable from host and device code (nvcc
/// resolves the C library names to its device intrinsics; g++ to libm).

#include <cmath>
#include <limits>

#include "cohort/core/macros.hpp"

namespace cohort::device::math {

COHORT_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
COHORT_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
COHORT_HOST_DEVICE inline float log(float x) { return ::logf(x); }
COHORT_HOST_DEVICE inline double log(double x) { return ::log(x); }
COHORT_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
COHORT_HOST_DEVICE inline float erfc(float x) { return ::erfcf(x); }
COHORT_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
COHORT_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
COHORT_HOST_DEVICE inline double erfc(double x) { return ::erfc(x); }
template <class A>
COHORT_HOST_DEVICE constexpr A infinity() {
  return std::numeric_limits<A>::infinity();
}
/// PyTorch's max-pool and max update: a later value wins when larger, or NaN while the best so
/// far is not (the first NaN stays): the CPU backend's rule.
template <class A>
COHORT_HOST_DEVICE constexpr bool takes_max(A v, A best) {
  return (v > best) || (v != v && best == best);
}

} // namespace cohort::device::math
