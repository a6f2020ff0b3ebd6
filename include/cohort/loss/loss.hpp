#pragma once
/// \file
/// What the classification losses share: label validation and the gradient view they return.
/// Example (compiled: tests/docs/headers.cpp, "loss/loss"):
///
///     double l = loss.forward(logits, labels);   // mean over the batch
///     net.backward(loss.backward());             // d loss / d logits, typed like the logits

#include <cstddef>
#include <cstdint>
#include <span>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// d loss / d input of a loss's last forward; converts to the batch view the network expects
/// (the feature count is checked).
template <class T>
class LossGradient {
 public:
  LossGradient() = default;
  LossGradient(const T* data, std::size_t batch, std::size_t features) noexcept
      : data_(data), batch_(batch), features_(features) {}

  template <ShapeType S>
  operator ConstBatchView<S, T>() const {
    if (S::size != features_)
      throw ShapeError(
          detail::concat("loss gradient: has ", features_, " features per sample, the network output has ", S::size));
    return {data_, batch_};
  }
  const T* data() const noexcept { return data_; }
  std::size_t batch() const noexcept { return batch_; }
  std::size_t features() const noexcept { return features_; }

 private:
  const T* data_ = nullptr;
  std::size_t batch_ = 0, features_ = 0;
};

namespace detail {
/// Throws unless there is one label per sample, each in [0, classes).
inline void check_labels(const char* loss, std::span<const std::int32_t> labels, std::size_t batch,
                         std::size_t classes) {
  if (labels.size() != batch)
    throw ShapeError(concat(loss, ": expected ", batch, " labels (one per sample), found ", labels.size()));
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || std::size_t(labels[i]) >= classes)
      throw ValueError(
          concat(loss, ": label of sample ", i, " is ", labels[i], ", expected a class in [0, ", classes, ")"));
}

/// Throws ShapeError unless there are batch * plane labels, ValueError for a label that is neither
/// a class in [0, classes) nor `ignore` (naming the sample, the pixel (h, w) and the value).
/// Shared by the per-pixel losses and SegmentationMetrics (`who` starts the message).
inline void check_pixel_labels(const char* who, std::span<const std::int32_t> labels, std::size_t batch,
                               std::size_t classes, std::size_t width, std::size_t plane, std::int32_t ignore) {
  if (labels.size() != batch * plane)
    throw ShapeError(concat(who, ": expected ", batch * plane, " labels (", batch, " samples of ", plane,
                            " pixels), found ", labels.size()));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::int32_t y = labels[i];
    if (y != ignore && (y < 0 || std::size_t(y) >= classes))
      throw ValueError(concat(who, ": label of sample ", i / plane, " at pixel (", i % plane / width, ", ", i % width,
                              ") is ", y, ", expected a class in [0, ", classes, ") or the ignore_index ", ignore));
  }
}

/// What both classification losses keep: the gradient of the last forward and its geometry.
template <class T, class Backend>
class ClassificationLoss {
 public:
  /// d loss / d input of the last forward.
  LossGradient<T> backward() const noexcept { return {grad_.data(), batch_, features_}; }
  /// The threads the loss kernels run on (a replica's own; default: the process's pool).
  void set_context(const typename Backend::context& ctx) noexcept { ctx_ = ctx; }

 protected:
  /// Checks labels and sizes the gradient for a (batch, features) input.
  void prepare(const char* loss, std::span<const std::int32_t> labels, std::size_t batch, std::size_t features) {
    check_labels(loss, labels, batch, features);
    grad_.resize(batch * features);
    batch_ = batch;
    features_ = features;
  }

  typename Backend::template buffer<T> grad_;
  typename Backend::context ctx_{};
  std::size_t batch_ = 0, features_ = 0;
};
} // namespace detail

} // namespace cohort
