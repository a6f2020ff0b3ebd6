#pragma once
/// \file
/// The data seam: what a dataset must say about itself, and the checks a Trainer makes before
/// it takes a step on it (issue 34). A dataset states its sample shape either in its type
/// (`using shape = Shape<C, H, W>`: compared with the network's input at compile time, a
/// mismatch is a compile error naming both shapes) or at run time (`sample_extents()`: compared
/// when fit or evaluate starts, `ShapeError`). Its classes (`num_classes()`, when it has one)
/// must fit the network's outputs, and every label must be one of the network's classes: both
/// checked when fit or evaluate starts (`ValueError` naming the dataset index), so nothing
/// trains on data that a later batch would reject.
/// Example (not compiled: a user's own type, shown in outline):
///
///     struct MySamples {                                  // anything with these members
///       using shape = cohort::Shape<3, 32, 32>;            //   or: std::vector<std::size_t> sample_extents() const
///       std::size_t size() const;
///       const float* image(std::size_t i) const;          //   shape::size floats
///       std::int32_t label(std::size_t i) const;
///       std::size_t num_classes() const;                   //   optional
///     };

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"

namespace cohort {

/// A dataset whose sample shape is part of its type (ImageDataset, RepeatedView, ImageView).
template <class D>
concept StaticallyShapedData = requires {
  typename D::shape;
}
&&ShapeType<typename D::shape>;

/// A dataset that knows its sample extents only at run time (C, H, W; or N for vectors).
template <class D>
concept DynamicallyShapedData = requires(const D& d) {
  { d.sample_extents() } -> std::convertible_to<std::vector<std::size_t>>;
};

/// Which random numbers a dataset that prepares its own samples (ImageFolder: decode, crop,
/// flip) uses for one batch: the Trainer's seed and the epoch, so a sample's pixels depend on
/// (seed, epoch, dataset index) only, never on the batch, the thread or the world size.
struct SampleDraw {
  std::uint64_t seed = 0, epoch = 0;
};

/// A dataset without an `image(i)` in memory that writes the samples of a batch itself:
/// `load_samples(indices, out, draw)` fills out with indices.size() samples of shape::size floats.
template <class D>
concept SampleLoadingData = requires(const D& d, std::span<const std::size_t> idx, std::span<float> out,
                                     const SampleDraw& draw) {
  d.load_samples(idx, out, draw);
};

namespace detail {

/// Instantiated with the dataset's shape and the network's input shape: when they differ, the
/// compiler's "required from" line names both (detail::dataset_shape_matches_network_input<
/// Shape<dataset's>, Shape<network's>>).
template <class DatasetShape, class NetworkInput>
struct dataset_shape_matches_network_input {
  static_assert(std::is_same_v<DatasetShape, NetworkInput>,
                "Trainer: the dataset's sample shape is not the network's input shape (the two are named in "
                "dataset_shape_matches_network_input<dataset's shape, network's input shape> below)");
  static constexpr bool value = true;
};

/// The compile-time half of the seam: true, or a compile error that says what is wrong.
template <class D, class NetworkInput>
constexpr bool dataset_type_fits() {
  static_assert(StaticallyShapedData<D> || DynamicallyShapedData<D>,
                "Trainer: a dataset must state its sample shape: `using shape = cohort::Shape<C, H, W>;` (checked "
                "against the network's input at compile time) or `std::vector<std::size_t> sample_extents() const` "
                "(checked when fit or evaluate starts)");
  if constexpr (StaticallyShapedData<D>)
    return dataset_shape_matches_network_input<typename D::shape, NetworkInput>::value;
  else
    return true;
}

inline std::string extents_string(const std::vector<std::size_t>& e) {
  std::string s;
  for (std::size_t i = 0; i < e.size(); ++i) s += (i ? "x" : "") + std::to_string(e[i]);
  return s.empty() ? "(no extents)" : s;
}

/// The run-time half: the extents of a run-time-shaped dataset, its class count and every
/// label, against a network with input `NetworkInput` and `outputs` class scores. `who` names
/// the caller in the messages ("Trainer::fit").
template <class NetworkInput, class D>
void check_dataset(const D& d, std::size_t outputs, const char* who) {
  if constexpr (DynamicallyShapedData<D> && !StaticallyShapedData<D>) {
    const std::vector<std::size_t> found = d.sample_extents();
    const std::vector<std::size_t> expected(NetworkInput::extents.begin(), NetworkInput::extents.end());
    if (found != expected)
      throw ShapeError(concat(who, ": the dataset's samples are ", extents_string(found), ", the network's input is ",
                              NetworkInput::str()));
  }
  if constexpr (requires { d.num_classes(); }) {
    if (std::size_t(d.num_classes()) > outputs)
      throw ValueError(concat(who, ": the dataset has ", d.num_classes(), " classes, the network has ", outputs,
                              " outputs (one score per class)"));
  }
  const std::size_t n = d.size();
  for (std::size_t i = 0; i < n; ++i)
    if (const std::int32_t y = d.label(i); y < 0 || std::size_t(y) >= outputs)
      throw ValueError(concat(who, ": the label of sample ", i, " of the dataset is ", y,
                              ", the network's classes are 0 to ", outputs - 1));
}

/// Instantiated with a dataset's mask shape and the height and width of a dense network's
/// output (both Shape<H, W>): when they differ, the compiler's "required from" line names both.
template <class MaskShape, class OutputPlane>
struct mask_shape_matches_network_output {
  static_assert(std::is_same_v<MaskShape, OutputPlane>,
                "Trainer: the dataset's masks are not the network's output height and width (the two are named in "
                "mask_shape_matches_network_output<dataset's mask_shape, network's output plane> below)");
  static constexpr bool value = true;
};

/// The run-time half for a dataset of masks (a class per pixel): its class count against the
/// `classes` the network scores per pixel, its ignore_index against the trainer's `ignore`, and
/// every mask value (`plane` of them per sample, rows of `width`), before any step.
template <class D>
void check_mask_dataset(const D& d, std::size_t classes, std::size_t width, std::size_t plane, std::int32_t ignore,
                        const char* who) {
  if (std::size_t(d.num_classes()) > classes)
    throw ValueError(
        concat(who, ": the dataset has ", d.num_classes(), " classes, the network scores ", classes, " per pixel"));
  if (std::int32_t(d.ignore_index()) != ignore)
    throw ValueError(concat(who, ": the dataset marks ignored pixels with ", d.ignore_index(),
                            ", the trainer's loss and metrics ignore ", ignore,
                            " (TrainerOptions::ignore_index): set the two alike"));
  const std::size_t n = d.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t* m = d.mask(i);
    for (std::size_t p = 0; p < plane; ++p)
      if (const std::int32_t y = m[p]; y != ignore && (y < 0 || std::size_t(y) >= classes))
        throw ValueError(concat(who, ": pixel (", p / width, ", ", p % width, ") of sample ", i, "'s mask is ", y,
                                ", expected a class in [0, ", classes, ") or the ignore_index ", ignore));
  }
}

/// Instantiated with a dataset's target shape and a dense network's output shape (image-to-image
/// regression): when they differ, the compiler's "required from" line names both.
template <class TargetShape, class NetworkOutput>
struct target_shape_matches_network_output {
  static_assert(std::is_same_v<TargetShape, NetworkOutput>,
                "Trainer: the dataset's target images are not the network's output shape (the two are named in "
                "target_shape_matches_network_output<dataset's target_shape, network's output shape> below)");
  static constexpr bool value = true;
};

/// The run-time half for a dataset of target images: every target value (`size` per sample, in
/// (C, H, W) order with planes of `height` x `width`) one the loss accepts (`accepts(v)`, which
/// `loss` names and `range` describes), before any step.
template <class D, class Accepts>
void check_target_dataset(const D& d, std::size_t size, std::size_t height, std::size_t width, Accepts accepts,
                          const char* loss, const char* range, const char* who) {
  const std::size_t n = d.size(), plane = height * width;
  for (std::size_t i = 0; i < n; ++i) {
    const float* t = d.target(i);
    for (std::size_t e = 0; e < size; ++e)
      if (!accepts(t[e]))
        throw ValueError(concat(who, ": sample ", i, "'s target is ", t[e], " at channel ", e / plane, ", pixel (",
                                e % plane / width, ", ", e % width, "); ", loss, " expects ", range));
  }
}

} // namespace detail
} // namespace cohort
