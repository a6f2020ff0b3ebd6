#pragma once
/// \file
/// The settings of a weight average (optim/weight_average.hpp), apart from it so that
/// TrainerOptions can name them without the network headers.
/// Example (compiled: tests/docs/headers.cpp, "optim/ema_options"):
///
///     cohort::TrainerOptions o{.ema = cohort::EmaOptions{.decay = 0.99, .every = 5}};

#include <cstddef>

namespace cohort {

/// An exponential moving average of the weights (TrainerOptions::ema; WeightAverage).
struct EmaOptions {
  /// torch's get_ema_multi_avg_fn(decay): the weight of the old average, in [0, 1].
  double decay = 0.999;
  /// Update after every `every`-th optimiser step (1: every step).
  std::size_t every = 1;
  /// Trainer: fit's evaluation after each epoch reports the average's test accuracy and loss,
  /// not the trained weights'.
  bool evaluate = true;
};

} // namespace cohort
