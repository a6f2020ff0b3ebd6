#pragma once
/// \file
/// A dataset over memory the caller owns: no copy. The view holds the spans it was given, so it
/// never reads outside them: their sizes are checked against the sample shape when it is built
/// (`ShapeError` naming expected and found), and so is every label against the class count
/// (`ValueError` naming the sample). The memory must outlive the view and stay unchanged while a
/// Trainer reads it (a Trainer reads it during fit and evaluate only, and gathers batches from
/// it on a prefetch thread during fit). To own a copy instead: `ImageDataset::copy_of`.
/// Example (compiled: tests/docs/headers.cpp, "data/image_view"):
///
///     std::vector<float> pixels(100 * 784);          // the caller's pipeline fills these
///     std::vector<std::int32_t> classes(100);
///     cohort::ImageView<cohort::Shape<1, 28, 28>> view(pixels, classes, 10);
///     const float* first = view.image(0);             // == pixels.data(): no copy

#include <cstddef>
#include <cstdint>
#include <span>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"

namespace cohort {

template <ShapeType InputShape>
class ImageView {
 public:
  using shape = InputShape;

  /// `images` holds labels.size() samples of InputShape::size floats each, sample after sample.
  ImageView(std::span<const float> images, std::span<const std::int32_t> labels, std::size_t num_classes)
      : images_(images), labels_(labels), classes_(num_classes) {
    if (classes_ == 0) throw ValueError("ImageView: num_classes must be at least 1");
    if (images_.size() != labels_.size() * InputShape::size)
      throw ShapeError(detail::concat("ImageView: ", labels_.size(), " labels need ", labels_.size() * InputShape::size,
                                      " floats of images (", InputShape::str(), " each), found ", images_.size()));
    for (std::size_t i = 0; i < labels_.size(); ++i)
      if (labels_[i] < 0 || std::size_t(labels_[i]) >= classes_)
        throw ValueError(detail::concat("ImageView: label of sample ", i, " is ", labels_[i],
                                        ", expected a class in [0, ", classes_, ")"));
  }

  std::size_t size() const noexcept { return labels_.size(); }
  std::size_t num_classes() const noexcept { return classes_; }
  /// Sample `i`'s InputShape::size floats, in the caller's memory; `i < size()`.
  const float* image(std::size_t i) const noexcept { return images_.data() + i * InputShape::size; }
  std::int32_t label(std::size_t i) const noexcept { return labels_[i]; }
  std::span<const float> images() const noexcept { return images_; }
  std::span<const std::int32_t> labels() const noexcept { return labels_; }

 private:
  std::span<const float> images_;
  std::span<const std::int32_t> labels_;
  std::size_t classes_;
};

} // namespace cohort
