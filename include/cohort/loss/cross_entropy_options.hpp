#pragma once
/// \file
/// torch.nn.CrossEntropyLoss's `label_smoothing` and `weight`, and the weight totals that the
/// engines normalise a split batch by.
/// Example (compiled: tests/docs/headers.cpp, "loss/cross_entropy_options"):
///
///     cohort::CrossEntropyLoss ce({.label_smoothing = 0.1, .class_weights = {1, 2, 1, 1, 1, 1, 1, 1, 1, 1}});
///
/// With class weights w and smoothing eps over C classes, the mean loss is torch's
///
///     (1 - eps) * sum_n w[y_n] * -logp[n, y_n] / W  +  (eps / C) * sum_n sum_c w[c] * -logp[n, c] / W
///
/// with W = sum_n w[y_n] (the batch's weight total; N without weights). The engines divide every
/// shard by the step's global W, so a split batch gives the loss of the whole batch.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/error.hpp"

namespace cohort {

/// What CrossEntropyLoss adds to plain cross-entropy (torch's names, mean reduction only).
///
///     cohort::TrainerOptions o;  o.loss = {.label_smoothing = 0.1};
struct CrossEntropyOptions {
  /// eps in [0, 1]: the target is (1 - eps) * onehot + eps / classes.
  double label_smoothing = 0;
  /// One non-negative, finite weight per class (empty: every class weighs 1).
  std::vector<float> class_weights{};

  /// Plain cross-entropy: neither smoothing nor weights.
  bool plain() const noexcept { return label_smoothing == 0 && class_weights.empty(); }
};

/// Class weights from text, "1,2,0.5" (empty: none), as command lines give them; throws
/// ValueError naming the text and the item that is not a number, or a weight that is negative or
/// not finite.
///
///     o.class_weights = cohort::parse_class_weights("1,2,0.5,1,1,1,1,1,1,1");
inline std::vector<float> parse_class_weights(std::string_view text) {
  std::vector<float> w;
  if (text.empty()) return w;
  for (std::size_t at = 0;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item(text.substr(at, comma - at));
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size())
      throw ValueError(detail::concat("class weights \"", detail::escaped(text), "\": item ", w.size(), " (\"",
                                      detail::escaped(item), "\") is not a number"));
    w.push_back(float(v));
    if (comma == text.size()) break;
    at = comma + 1;
  }
  for (std::size_t c = 0; c < w.size(); ++c)
    if (!std::isfinite(w[c]) || w[c] < 0)
      throw ValueError(detail::concat("class weights \"", detail::escaped(text), "\": weight ", c,
                                      " must be finite and >= 0, found ", w[c]));
  return w;
}

namespace detail {

/// Throws ValueError unless smoothing is in [0, 1] and every weight is finite and >= 0.
inline void check_cross_entropy_options(const char* loss, const CrossEntropyOptions& o) {
  if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) // NaN fails too
    throw ValueError(concat(loss, ": label_smoothing must be in [0, 1], found ", o.label_smoothing));
  for (std::size_t c = 0; c < o.class_weights.size(); ++c)
    if (!std::isfinite(o.class_weights[c]) || o.class_weights[c] < 0)
      throw ValueError(concat(loss, ": class weight ", c, " must be finite and >= 0, found ", o.class_weights[c]));
}

/// Throws ShapeError unless there is one weight per class (when there are weights at all).
inline void check_class_weight_count(const char* loss, const CrossEntropyOptions& o, std::size_t classes) {
  if (!o.class_weights.empty() && o.class_weights.size() != classes)
    throw ShapeError(concat(loss, ": expected ", classes, " class weights (one per class of the scores), found ",
                            o.class_weights.size()));
}

/// Adds each label's count to `counts` (one entry per class; labels already checked).
inline void count_classes(std::span<const std::int32_t> labels, std::span<double> counts) {
  for (const std::int32_t y : labels) counts[std::size_t(y)] += 1;
}

/// sum_c counts[c] * w[c] in class order: the weight total of labels with these class counts
/// (no weights: every class weighs 1, the count of labels). Counts are integers (exact in
/// double, exact when all-reduced), so the total has the same bits however the labels were
/// split between replicas, chunks and ranks.
inline double weight_total(std::span<const float> w, std::span<const double> counts) {
  double total = 0;
  if (w.empty()) {
    for (const double n : counts) total += n;
    return total;
  }
  for (std::size_t c = 0; c < w.size(); ++c) total += counts[c] * double(w[c]);
  return total;
}

/// Throws ValueError when a batch's weight total is not positive (torch returns NaN: 0 / 0).
inline void check_weight_total(const char* loss, double total, std::size_t labels) {
  if (!(total > 0))
    throw ValueError(concat(loss, ": the class weights of the batch's ", labels, " labels sum to ", total,
                            ", expected a positive sum (every label in the batch has a class of weight 0)"));
}

/// A double as text that reads back to the same value ("0.1", "0.30000000000000004"): what ranks
/// compare (ProcessGroupDDP's agreement) must not round two different settings to one.
inline std::string exact_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// "1,2,0.5" (each weight exactly; "none" without weights).
inline std::string class_weights_text(std::span<const float> w) {
  if (w.empty()) return "none";
  std::string out;
  char buf[32];
  for (std::size_t c = 0; c < w.size(); ++c) {
    std::snprintf(buf, sizeof buf, "%s%.9g", c ? "," : "", double(w[c]));
    out += buf;
  }
  return out;
}

} // namespace detail
} // namespace cohort
