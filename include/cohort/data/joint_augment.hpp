#pragma once
/// \file
/// Augmentation of dense samples: the same random crop and flip applied to an image and to its
/// target, a class mask (int32, H x W) or a target image (float, C' x H x W), as torchvision's
/// segmentation references (and transforms.v2 on an image with its Mask) do.
/// Example (compiled: tests/docs/headers.cpp, "data/joint_augment"):
///
///     JointAugmentation aug{JointRandomCrop(28, 2, norm), JointRandomHorizontalFlip()};
///     aug.apply(image, {1, 28, 28}, mask, /*seed=*/1, /*epoch=*/0, /*sample=*/17);   // both in place
///
/// What a transform does to the image is exactly what data/augment.hpp's transform of the same
/// name does (RandomCrop with the normalisation's raw-zero padding, RandomHorizontalFlip), with
/// the same random numbers: the streams of `AugmentRandom(seed, epoch, sample, position)`. So a
/// sample's image and target move together, reproducibly, under every parallel policy and
/// across a resume. Masks move by whole pixels (no interpolation: nearest, as masks need), and
/// their padding is `mask_fill`, by default -100, the ignore_index of PixelCrossEntropyLoss and
/// SegmentationMetrics: pixels that came from outside the image are neither trained on nor scored.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/data/augment.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/data/detail/plane_shift.hpp"

namespace cohort {

/// A dense sample's target as a joint transform sees it: a class mask (`channels` 0: H x W
/// int32) or a target image (C' x H x W float), with the image's height and width.
struct DenseTarget {
  std::span<std::int32_t> mask{};
  std::span<float> image{};
  std::size_t channels = 0; // of `image`

  DenseTarget(std::span<std::int32_t> m) : mask(m) {} // NOLINT: a mask is a target
  DenseTarget(std::span<float> i, std::size_t c) : image(i), channels(c) {}
};

/// torchvision's RandomCrop(size, padding) on the image and its target together: the window
/// RandomCrop (data/augment.hpp) draws, at the same place in both. Image padding is a raw 0
/// pixel after `norm` (as RandomCrop's), mask padding `mask_fill`, target-image padding
/// `target_fill`. The window must be the image's size: ShapeError otherwise.
struct JointRandomCrop {
  RandomCrop crop; // what happens to the image; its size, padding and normalisation
  std::int32_t mask_fill = -100;
  float target_fill = 0.f;

  JointRandomCrop(std::size_t size_, std::size_t padding_, Normalization norm_ = {}, std::int32_t mask_fill_ = -100,
                  float target_fill_ = 0.f)
      : crop(size_, padding_, std::move(norm_)), mask_fill(mask_fill_), target_fill(target_fill_) {}

  void operator()(std::span<float> image, ImageDims s, const DenseTarget& target, const AugmentRandom& rng) const {
    crop(image, s, rng); // checks the sizes first
    const auto [dy, dx] = crop.offsets(s, rng);
    if (target.channels == 0) detail::shift_plane(target.mask.data(), s.height, s.width, dy, dx, mask_fill);
    for (std::size_t c = 0; c < target.channels; ++c)
      detail::shift_plane(target.image.data() + c * s.height * s.width, s.height, s.width, dy, dx, target_fill);
  }
};

/// torchvision's RandomHorizontalFlip(p) on the image and its target together.
struct JointRandomHorizontalFlip {
  float p = 0.5f;

  explicit JointRandomHorizontalFlip(float p_ = 0.5f) : p(p_) { (void)RandomHorizontalFlip(p); }

  void operator()(std::span<float> image, ImageDims s, const DenseTarget& target, const AugmentRandom& rng) const {
    if (!(rng.uniform(0) < p)) return; // RandomHorizontalFlip's draw
    detail::mirror_rows(image.data(), s.channels * s.height, s.width);
    if (target.channels == 0)
      detail::mirror_rows(target.mask.data(), s.height, s.width);
    else
      detail::mirror_rows(target.image.data(), target.channels * s.height, s.width);
  }
};

/// A pipeline of joint transforms, applied in order; transform i draws from the stream of
/// position i, as Augmentation's do (so JointAugmentation{JointRandomCrop(...), JointRandomHorizontalFlip()}
/// does to the image what Augmentation{RandomCrop(...), RandomHorizontalFlip()} does).
class JointAugmentation {
 public:
  using Transform = std::variant<JointRandomCrop, JointRandomHorizontalFlip>;

  JointAugmentation() = default;
  template <class... T>
  requires(sizeof...(T) > 0 &&
           (std::is_constructible_v<Transform, T> && ...)) explicit JointAugmentation(T... transforms) {
    (add(std::move(transforms)), ...);
  }

  JointAugmentation& add(Transform t) {
    if (steps_.size() == Augmentation::max_transforms)
      throw ValueError(detail::concat("JointAugmentation: at most ", Augmentation::max_transforms, " transforms"));
    steps_.push_back(std::move(t));
    return *this;
  }

  bool empty() const noexcept { return steps_.empty(); }
  std::size_t size() const noexcept { return steps_.size(); }
  /// "RandomCrop(28, padding=2), RandomHorizontalFlip(p=0.5)" (for logs).
  std::string names() const {
    std::string s;
    for (const Transform& t : steps_) {
      s += s.empty() ? "" : ", ";
      if (const auto* c = std::get_if<JointRandomCrop>(&t))
        s += detail::concat("RandomCrop(", c->crop.size, ", padding=", c->crop.padding, ")");
      else
        s += detail::concat("RandomHorizontalFlip(p=", std::get<JointRandomHorizontalFlip>(t).p, ")");
    }
    return s;
  }

  /// Transforms `image` (one sample of `shape`) and its mask (shape.height x shape.width
  /// classes) in place as sample `sample` of epoch `epoch`.
  void apply(std::span<float> image, ImageDims shape, std::span<std::int32_t> mask, std::uint64_t seed,
             std::uint64_t epoch, std::uint64_t sample) const {
    if (mask.size() != shape.height * shape.width)
      throw ShapeError(detail::concat("JointAugmentation: a mask of ", shape.height, "x", shape.width, " has ",
                                      shape.height * shape.width, " values, got ", mask.size()));
    run(image, shape, DenseTarget(mask), seed, epoch, sample);
  }
  /// The same with a target image of `target_channels` channels of the image's height and width.
  void apply(std::span<float> image, ImageDims shape, std::span<float> target, std::size_t target_channels,
             std::uint64_t seed, std::uint64_t epoch, std::uint64_t sample) const {
    if (target_channels == 0 || target.size() != target_channels * shape.height * shape.width)
      throw ShapeError(detail::concat("JointAugmentation: a target image of ", target_channels, "x", shape.height, "x",
                                      shape.width, " has ", target_channels * shape.height * shape.width,
                                      " values (at least one channel), got ", target.size()));
    run(image, shape, DenseTarget(target, target_channels), seed, epoch, sample);
  }

 private:
  void run(std::span<float> image, ImageDims shape, const DenseTarget& target, std::uint64_t seed, std::uint64_t epoch,
           std::uint64_t sample) const {
    if (image.size() != shape.size())
      throw ShapeError(detail::concat("JointAugmentation: an image of ", shape.channels, "x", shape.height, "x",
                                      shape.width, " has ", shape.size(), " values, got ", image.size()));
    if (sample >> 36) throw ValueError(detail::concat("JointAugmentation: sample index ", sample, " is beyond 2^36"));
    for (std::size_t i = 0; i < steps_.size(); ++i)
      std::visit([&](const auto& t) { t(image, shape, target, AugmentRandom(seed, epoch, sample, i)); }, steps_[i]);
  }

  std::vector<Transform> steps_;
};

} // namespace cohort
