#pragma once
/// \file
/// MicroStep: what the Trainer tells an engine about the micro-batch it hands over.

#include <cstddef>
#include <cstdint>

namespace cohort {

/// One micro-batch of an optimiser step, as the Trainer hands it to an engine.
struct MicroStep {
  /// Optimiser steps taken before this one (named in distributed errors).
  std::uint64_t step = 0;
  /// Global micro-batches trained before this one: selects the dropout masks (the same on every
  /// replica and rank).
  std::uint64_t forward_pass = 0;
  /// Gradient accumulation: this micro-batch's index among the `count` that make one step.
  std::size_t index = 0, count = 1;
  bool last() const noexcept { return index + 1 == count; }
};

} // namespace cohort
