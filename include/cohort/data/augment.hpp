#pragma once
/// \file
/// Data augmentation on normalised CHW images: torchvision's RandomCrop(size, padding) and
/// RandomHorizontalFlip(p), and transforms of one's own, chained in an `Augmentation`.
/// Example (compiled: tests/docs/headers.cpp, "data/augment"):
///
///     const Normalization norm = cifar.statistics();
///     Augmentation aug{RandomCrop(32, 4, norm), RandomHorizontalFlip()};
///     aug.apply(image, {3, 32, 32}, /*seed=*/1, /*epoch=*/0, /*sample=*/17);   // in place
///
/// Every random number comes from `RandomStream{seed, streams::augment(epoch, sample,
/// position)}` (core/random.hpp): what happens to a sample depends only on the seed, the epoch,
/// the sample's index in the dataset and the transform's position in the pipeline, never on
/// the batch it lands in, the thread that assembles it, the replica count or the world size.
/// A training run with augmentation is therefore identical under every parallel policy, and a
/// resumed run (the checkpoint holds seed and epoch) sees the same images as an uninterrupted one.
///
/// Images are stored normalised (data/dataset.hpp), so "zero padding" needs care: torchvision's
/// recipe `RandomCrop(32, padding=4)` runs on the raw image, before ToTensor and Normalize, so the
/// padding is a raw 0 pixel, which reaches the network as (0 - mean_c) / std_c in channel c.
/// RandomCrop therefore takes the dataset's Normalization and pads channel c with
/// `norm.normalized(0, c)`: exactly the value torchvision's pipeline produces. (With the default
/// Normalization{}, mean 0 and std 1, that is 0.)

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/random.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/data/detail/plane_shift.hpp"
#include "cohort/data/sampler.hpp"

namespace cohort {

/// The shape of one image as a transform sees it: channels, height, width (CHW, row-major).
struct ImageDims {
  std::size_t channels = 1, height = 1, width = 1;
  constexpr std::size_t size() const noexcept { return channels * height * width; }
  friend constexpr bool operator==(const ImageDims&, const ImageDims&) = default;
};

/// The random numbers of one transform applied to one sample: draw `k` (any k < 2^32) of the
/// stream keyed by (seed, epoch, sample, position). Two draws with different k are independent;
/// the same k always gives the same number.
///
///     if (rng.uniform(0) < 0.5f) ...;   const std::uint32_t dy = rng.below(1, 9);   // in [0, 9)
class AugmentRandom {
 public:
  AugmentRandom(std::uint64_t seed, std::uint64_t epoch, std::uint64_t sample, std::size_t position) noexcept
      : stream_{seed, streams::augment(epoch, sample, position)} {}

  /// 32 random bits.
  std::uint32_t bits(std::uint32_t k) const noexcept { return stream_.bits(k); }
  /// Uniform in [0, 1), 24 bits of resolution (torch.rand's float resolution).
  float uniform(std::uint32_t k) const noexcept { return stream_.uniform(k); }
  /// Uniform integer in [0, bound) without bias (bound >= 1); retries of draw k use words no other
  /// draw reads (sampler.hpp's uniform_below).
  std::uint32_t below(std::uint32_t k, std::uint32_t bound) const noexcept {
    return detail::uniform_below(stream_, k, bound);
  }
  const RandomStream& stream() const noexcept { return stream_; }

 private:
  RandomStream stream_;
};

/// What a transform is: a const callable that changes one normalised image in place, given its
/// shape and its random numbers. It must be a pure function of those (no state it changes, no
/// other source of randomness): it runs on the trainer's prefetch thread, and determinism across
/// policies rests on it.
///
///     auto invert = [](std::span<float> image, ImageDims, const AugmentRandom& rng) {
///       if (rng.uniform(0) < 0.1f) for (float& v : image) v = -v;
///     };
template <class T>
concept ImageTransform = std::copy_constructible<T> &&
    requires(const T& t, std::span<float> image, ImageDims shape, const AugmentRandom& rng) {
  t(image, shape, rng);
};

/// torchvision's RandomCrop(size, padding) with zero padding (padding_mode "constant", fill 0) on
/// a normalised image: pad each side with `padding` raw-zero pixels, then cut a size x size window
/// at top = below(0, H + 2 padding - size + 1), left = below(1, W + 2 padding - size + 1). The
/// window must have the image's size (the network's input shape is fixed): ShapeError otherwise.
/// Pass the dataset's normalisation so the padding is what a raw 0 becomes (see the file comment).
///
///     RandomCrop crop(32, 4, norm);   // CIFAR's standard augmentation
struct RandomCrop {
  std::size_t size = 0, padding = 0;
  Normalization norm{};

  RandomCrop(std::size_t size_, std::size_t padding_, Normalization norm_ = {})
      : size(size_), padding(padding_), norm(std::move(norm_)) {
    if (size == 0 || size > (1u << 20) || padding > (1u << 20))
      throw ValueError(detail::concat("RandomCrop: size must be in [1, 2^20] and padding at most 2^20, got size ", size,
                                      ", padding ", padding));
    for (std::size_t c = 0; c < std::max<std::size_t>(norm.channels(), 1); ++c) (void)norm.table(c); // checked now
  }

  void operator()(std::span<float> image, ImageDims s, const AugmentRandom& rng) const {
    if (s.height != size || s.width != size)
      throw ShapeError(detail::concat("RandomCrop: the crop is ", size, "x", size, " but the images are ", s.height,
                                      "x", s.width, " (the network's input); crop to the input size"));
    if (norm.channels() != 0 && norm.channels() != s.channels)
      throw ShapeError(detail::concat("RandomCrop: the normalisation has ", norm.channels(),
                                      " channel(s), the images have ", s.channels));
    const auto [dy, dx] = offsets(s, rng);
    for (std::size_t c = 0; c < s.channels; ++c)
      detail::shift_plane(image.data() + c * s.height * s.width, s.height, s.width, dy, dx, norm.normalized(0, c));
  }

  /// Where the window starts relative to the image, (top - padding, left - padding), each in
  /// [-padding, padding]: draws 0 and 1 (data/joint_augment.hpp's crop moves a mask by the same).
  std::pair<std::ptrdiff_t, std::ptrdiff_t> offsets(ImageDims s, const AugmentRandom& rng) const {
    const std::uint32_t span_h = std::uint32_t(s.height + 2 * padding - size + 1);
    const std::uint32_t span_w = std::uint32_t(s.width + 2 * padding - size + 1);
    return {std::ptrdiff_t(rng.below(0, span_h)) - std::ptrdiff_t(padding),
            std::ptrdiff_t(rng.below(1, span_w)) - std::ptrdiff_t(padding)};
  }
};

/// torchvision's RandomHorizontalFlip(p): mirrors every row (x -> W - 1 - x) when
/// uniform(0) < p.
///
///     RandomHorizontalFlip flip;          // p = 0.5
///     RandomHorizontalFlip always(1.0);
struct RandomHorizontalFlip {
  float p = 0.5f;

  explicit RandomHorizontalFlip(float p_ = 0.5f) : p(p_) {
    if (!(p >= 0.f && p <= 1.f)) throw ValueError(detail::concat("RandomHorizontalFlip: p must be in [0, 1], got ", p));
  }

  void operator()(std::span<float> image, ImageDims s, const AugmentRandom& rng) const {
    if (rng.uniform(0) < p) detail::mirror_rows(image.data(), s.channels * s.height, s.width);
  }
};

/// A pipeline of transforms applied in order to training images (TrainerOptions::augment).
/// Transform i draws from the stream of position i, so adding a transform at the end changes
/// nothing the earlier ones do.
///
///     Augmentation aug{RandomCrop(32, 4, norm), RandomHorizontalFlip()};
///     aug.add([](std::span<float> x, ImageDims, const AugmentRandom& r) { ... }, "my transform");
class Augmentation {
 public:
  using Transform = std::function<void(std::span<float>, ImageDims, const AugmentRandom&)>;
  /// Positions 0..253 of streams::augment; 254 and 255 are ImageFolder's own random transforms
  /// (data/image_folder.hpp), so a folder's crop never draws the numbers of a pipeline's.
  static constexpr std::size_t max_transforms = 254;

  Augmentation() = default;
  template <ImageTransform... T>
  requires(sizeof...(T) > 0) explicit Augmentation(T... transforms) { (add(std::move(transforms)), ...); }

  /// Appends a transform; `name` is what names() reports (built-in transforms name themselves).
  template <ImageTransform T>
  Augmentation& add(T transform, std::string name = {}) {
    if (steps_.size() == max_transforms)
      throw ValueError(detail::concat("Augmentation: at most ", max_transforms, " transforms"));
    if (name.empty()) name = default_name(transform);
    steps_.push_back({Transform(std::move(transform)), std::move(name)});
    return *this;
  }

  bool empty() const noexcept { return steps_.empty(); }
  std::size_t size() const noexcept { return steps_.size(); }
  /// "RandomCrop(32, padding=4), RandomHorizontalFlip(p=0.5)" (for logs).
  std::string names() const {
    std::string s;
    for (const auto& step : steps_) s += (s.empty() ? "" : ", ") + step.name;
    return s;
  }

  /// Transforms `image` (one sample of `shape`) in place as sample `sample` of epoch `epoch`.
  void apply(std::span<float> image, ImageDims shape, std::uint64_t seed, std::uint64_t epoch,
             std::uint64_t sample) const {
    if (image.size() != shape.size())
      throw ShapeError(detail::concat("Augmentation: an image of ", shape.channels, "x", shape.height, "x", shape.width,
                                      " has ", shape.size(), " values, got ", image.size()));
    if (sample >> 36) throw ValueError(detail::concat("Augmentation: sample index ", sample, " is beyond 2^36"));
    for (std::size_t i = 0; i < steps_.size(); ++i) steps_[i].fn(image, shape, AugmentRandom(seed, epoch, sample, i));
  }

  /// Transforms `samples.size()` consecutive images of `shape` in `images`, image i being dataset
  /// sample samples[i]: how the trainer augments a batch.
  void apply_batch(std::span<float> images, ImageDims shape, std::span<const std::size_t> samples, std::uint64_t seed,
                   std::uint64_t epoch) const {
    for (std::size_t i = 0; i < samples.size(); ++i)
      apply(images.subspan(i * shape.size(), shape.size()), shape, seed, epoch, samples[i]);
  }

 private:
  template <class T>
  static std::string default_name(const T& t) {
    if constexpr (std::same_as<T, RandomCrop>)
      return detail::concat("RandomCrop(", t.size, ", padding=", t.padding, ")");
    else if constexpr (std::same_as<T, RandomHorizontalFlip>)
      return detail::concat("RandomHorizontalFlip(p=", t.p, ")");
    else
      return "custom";
  }

  struct Step {
    Transform fn;
    std::string name;
  };
  std::vector<Step> steps_;
};

/// Parses "crop=4,flip" (the examples' --augment flag) for `size` x `size` images: `crop=P`
/// (RandomCrop(size, P, norm)), `flip` or `flip=P` (RandomHorizontalFlip(P)); empty: no
/// augmentation. ValueError naming the part it does not understand.
inline Augmentation parse_augmentation(const std::string& text, std::size_t size, const Normalization& norm = {}) {
  Augmentation a;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    at = comma + 1;
    const std::size_t eq = part.find('=');
    const std::string key = part.substr(0, eq), value = eq == std::string::npos ? "" : part.substr(eq + 1);
    try {
      std::size_t used = 0;
      if (key == "crop" && !value.empty()) {
        const unsigned long pad = std::stoul(value, &used);
        if (used == value.size()) {
          a.add(RandomCrop(size, pad, norm));
          continue;
        }
      } else if (key == "flip" && value.empty()) {
        a.add(RandomHorizontalFlip());
        continue;
      } else if (key == "flip") {
        const float p = std::stof(value, &used);
        if (used == value.size()) {
          a.add(RandomHorizontalFlip(p));
          continue;
        }
      }
    } catch (const std::logic_error&) { // std::stoul / std::stof: not a number
    }
    throw ValueError(detail::concat("augmentation: cannot read ", detail::in_quotes(part), " in ",
                                    detail::in_quotes(text),
                                    " (expected crop=PADDING, flip or flip=P, comma-separated)"));
  }
  return a;
}

} // namespace cohort
