#pragma once
/// \file
/// The default precision policy: float everywhere.
/// Example (compiled: tests/docs/headers.cpp, "precision/full_precision"):
///
///     cohort::Trainer<Net, cohort::Sgd<>, cohort::SingleDevice<>, cohort::FullPrecision> trainer(opt);

#include <concepts>
#include <string_view>

namespace cohort {

/// `FullPrecision`: weights, activations, gradients and optimiser state in float.
struct FullPrecision {
  using compute_type = float;
  static constexpr std::string_view name = "fp32";
};

/// A precision policy: the element type layers compute in (master weights are always float).
template <class P>
concept PrecisionPolicy = requires {
  typename P::compute_type;
  { P::name } -> std::convertible_to<std::string_view>;
};

} // namespace cohort
