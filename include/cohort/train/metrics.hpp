#pragma once
/// \file
/// The metrics file: one JSON object per epoch, appended, with seed 003's field names (its
/// benchmark sweep reads "first epoch time", "second epoch time", "n_dataset_repeat", ...), so
/// the seed's plotting scripts and scripts/plot_metrics.py read cohort's runs.
/// Example (not compiled: a line of the metrics file, not code):
///
///     {"epoch": 0, "complete": true, "n_dataset_repeat": 1, "batch_size": 128, "n_devices": 1,
///      "parallel": "SingleDevice", "model_size": "A", "first epoch time": 12.3, ...}
///
/// Unknown numbers (no test set, one epoch so far) are null.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "cohort/core/error.hpp"
#include "cohort/detail/json.hpp"

namespace cohort {

/// One epoch's line of the metrics file.
struct EpochMetrics {
  std::uint64_t epoch = 0;
  bool complete = true;
  std::size_t n_dataset_repeat = 1, batch_size = 0, n_devices = 1, steps = 0;
  std::string parallel, model_size, precision;
  std::optional<double> first_epoch_seconds, second_epoch_seconds; // complete epochs of this run
  double epoch_seconds = 0, train_loss = 0, samples_per_s = 0;
  std::optional<double> test_accuracy, test_loss;
  std::optional<double> test_mean_iou; // dense networks (EpochReport::test_mean_iou)
  std::uint64_t skipped_steps = 0;
  std::optional<std::size_t> skipped_files; // files the training set left out (EpochReport::skipped_files)
  double loss_scale = 0;                    // fp16's scale after the epoch; 0: none (null)
};

namespace detail {
/// A JSON number, or null for what is not known (NaN) or not finite.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
inline std::string json_number(const std::optional<double>& v) { return v ? json_number(*v) : std::string("null"); }
} // namespace detail

/// Appends `m` to `path` as one line (IoError naming the file if it cannot).
inline void append_metrics(const std::filesystem::path& path, const EpochMetrics& m) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw IoError(detail::concat(path.string(), ": cannot open the metrics file for appending"));
  using detail::json_number;
  using detail::json_quote;
  out << "{\"epoch\": " << m.epoch << ", \"complete\": " << (m.complete ? "true" : "false")
      << ", \"n_dataset_repeat\": " << m.n_dataset_repeat << ", \"batch_size\": " << m.batch_size
      << ", \"n_devices\": " << m.n_devices << ", \"parallel\": " << json_quote(m.parallel)
      << ", \"model_size\": " << json_quote(m.model_size)
      << ", \"first epoch time\": " << json_number(m.first_epoch_seconds)
      << ", \"second epoch time\": " << json_number(m.second_epoch_seconds)
      << ", \"epoch time\": " << json_number(m.epoch_seconds) << ", \"steps\": " << m.steps
      << ", \"train_loss\": " << json_number(m.train_loss) << ", \"test_accuracy\": " << json_number(m.test_accuracy)
      << ", \"test_loss\": " << json_number(m.test_loss) << ", \"test_mean_iou\": " << json_number(m.test_mean_iou)
      << ", \"samples_per_s\": " << json_number(m.samples_per_s) << ", \"precision\": " << json_quote(m.precision)
      << ", \"skipped_steps\": " << m.skipped_steps
      << ", \"skipped_files\": " << (m.skipped_files ? std::to_string(*m.skipped_files) : std::string("null"))
      << ", \"loss_scale\": " << (m.loss_scale > 0 ? json_number(m.loss_scale) : std::string("null")) << "}\n";
  if (!out) throw IoError(detail::concat(path.string(), ": writing the metrics failed"));
}

} // namespace cohort
