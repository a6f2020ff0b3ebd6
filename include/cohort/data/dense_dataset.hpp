#pragma once
/// \file
/// In-memory datasets for dense prediction, where every sample's target has the image's height
/// and width: `MaskDataset<Shape<C, H, W>>`, a class per pixel (segmentation), and
/// `ImagePairDataset<Shape<C, H, W>, Shape<C', H, W>>`, a target image (denoising, depth,
/// super-resolution at one scale).
/// Example (compiled: tests/docs/headers.cpp, "data/dense_dataset"):
///
///     using Data = cohort::MaskDataset<cohort::Shape<1, 28, 28>>;
///     auto train = Data::load("images-idx3-ubyte", "masks-idx3-ubyte", /*classes=*/11, norm);
///     cohort::check_dense_data<Net>(train, "train");        // shapes at compile time, classes now
///     train.load_batch(indices, x, masks, aug, {seed, epoch});   // gathered, jointly augmented
///
/// Images are stored normalised (data/dataset.hpp's Normalization), as float, one sample after
/// another; masks as int32 class indices, H x W per sample, each a class in [0, classes) or the
/// dataset's ignore_index (default -100, PixelCrossEntropyLoss's and SegmentationMetrics';
/// VOC-style masks use 255). Every value is checked when the dataset is built: a ShapeError
/// when sizes disagree, a ValueError naming the sample, the pixel and the value otherwise, so
/// no step is ever taken on a bad mask. `load_batch` gathers samples by index and applies a
/// JointAugmentation (data/joint_augment.hpp) to each image with its target, its random numbers
/// keyed by (seed, epoch, dataset index) as the Trainer's augmentation is.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/data/idx.hpp"
#include "cohort/data/joint_augment.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

namespace detail {

/// Normalised floats from bytes of (N, C, H, W) images, channel c through norm's table c.
template <ShapeType S>
HostBuffer<float> normalise_pixels(std::span<const std::uint8_t> pixels, const Normalization& norm, const char* who) {
  constexpr std::size_t C = S::extents[0], plane = S::extents[1] * S::extents[2];
  if (norm.channels() != 0 && norm.channels() != C)
    throw ValueError(
        concat(who, ": the images have ", C, " channel(s) (", S::str(), "), the normalisation has ", norm.channels()));
  std::vector<std::array<float, 256>> tables;
  for (std::size_t c = 0; c < C; ++c) tables.push_back(norm.table(c));
  HostBuffer<float> x(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) x[i] = tables[(i / plane) % C][pixels[i]];
  return x;
}

/// An IDX file of (N, H, W) bytes whose H and W are S's; `what` names it in errors.
template <ShapeType S>
IdxArray read_idx_planes(const std::filesystem::path& path, const char* who) {
  IdxArray a = read_idx(path, idx_images_magic);
  if (a.dims.size() != 3 || a.dims[1] != S::extents[1] || a.dims[2] != S::extents[2])
    throw ShapeError(concat(path.string(), ": ", who, " expects (N, ", S::extents[1], ", ", S::extents[2],
                            ") bytes for ", S::str(), " samples, the file has ", idx_dims_string(a.dims)));
  return a;
}

template <class T>
HostBuffer<T> buffer_of(std::span<const T> values) {
  HostBuffer<T> b(values.size());
  std::copy(values.begin(), values.end(), b.data());
  return b;
}

/// Gathers samples `indices` of `sample` floats each from `images` into `out`.
inline void gather_samples(const float* images, std::size_t sample, std::span<const std::size_t> indices,
                           std::size_t size, std::span<float> out, const char* who) {
  if (out.size() != indices.size() * sample)
    throw ShapeError(concat(who, ": ", indices.size(), " samples need ", indices.size() * sample,
                            " floats of images, the output has ", out.size()));
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= size)
      throw ValueError(concat(who, ": sample index ", indices[i], " is outside the dataset's ", size, " samples"));
    std::copy_n(images + indices[i] * sample, sample, out.data() + i * sample);
  }
}

} // namespace detail

/// Images of shape InputShape (C, H, W) with a class per pixel: N x H x W int32 masks.
///
///     auto d = MaskDataset<Shape<3, 64, 64>>::from_pixels(rgb_bytes, mask_bytes, 21, norm, 255);
///     const std::int32_t* m = d.mask(7);   // 64 * 64 classes
template <ShapeType InputShape>
class MaskDataset {
  static_assert(InputShape::rank == 3, "MaskDataset: the samples must be images, Shape<C, H, W>");

 public:
  using shape = InputShape;
  static constexpr std::size_t height = InputShape::extents[1], width = InputShape::extents[2];
  static constexpr std::size_t pixels = height * width;
  /// One class per pixel.
  using mask_shape = Shape<height, width>;

  MaskDataset() = default;

  /// Takes normalised images (N x InputShape::size floats) and their masks (N x H x W classes).
  /// ShapeError when the sizes disagree, ValueError for a mask value that is neither a class
  /// nor `ignore_index`.
  MaskDataset(HostBuffer<float> images, HostBuffer<std::int32_t> masks, std::size_t num_classes,
              std::int32_t ignore_index = -100)
      : images_(std::move(images)), masks_(std::move(masks)), classes_(num_classes), ignore_(ignore_index) {
    if (classes_ == 0) throw ValueError("MaskDataset: num_classes must be at least 1");
    if (masks_.size() % pixels != 0 || images_.size() != masks_.size() / pixels * InputShape::size)
      throw ShapeError(detail::concat(
          "MaskDataset: ", masks_.size(), " mask values are ", masks_.size() / pixels, " masks of ", height, "x", width,
          masks_.size() % pixels ? detail::concat(" and ", masks_.size() % pixels, " more") : std::string(),
          ", which need ", masks_.size() / pixels * InputShape::size, " floats of images (", InputShape::str(),
          " each), found ", images_.size()));
    for (std::size_t i = 0; i < masks_.size(); ++i)
      if (const std::int32_t v = masks_[i]; v != ignore_ && (v < 0 || std::size_t(v) >= classes_))
        throw ValueError(detail::concat("MaskDataset: pixel (", i % pixels / width, ", ", i % width, ") of sample ",
                                        i / pixels, "'s mask is ", v, ", expected a class in [0, ", classes_,
                                        ") or the ignore_index ", ignore_));
  }

  /// A copy of images (normalised floats) and masks in the caller's memory.
  static MaskDataset copy_of(std::span<const float> images, std::span<const std::int32_t> masks,
                             std::size_t num_classes, std::int32_t ignore_index = -100) {
    return MaskDataset(detail::buffer_of(images), detail::buffer_of(masks), num_classes, ignore_index);
  }

  /// From bytes: `image_bytes` N images of InputShape (CHW, channel after channel), `mask_bytes` N
  /// masks of H x W class indices (a byte equal to ignore_index, e.g. VOC's 255, is ignored).
  static MaskDataset from_pixels(std::span<const std::uint8_t> image_bytes, std::span<const std::uint8_t> mask_bytes,
                                 std::size_t num_classes, const Normalization& norm, std::int32_t ignore_index = -100) {
    if (image_bytes.size() % InputShape::size != 0 ||
        mask_bytes.size() != image_bytes.size() / InputShape::size * pixels)
      throw ShapeError(detail::concat("MaskDataset: ", image_bytes.size(), " bytes of images (", InputShape::str(),
                                      " each) and ", mask_bytes.size(), " bytes of masks (", height, "x", width,
                                      " each) are not the same whole number of samples"));
    HostBuffer<std::int32_t> m(mask_bytes.size());
    for (std::size_t i = 0; i < mask_bytes.size(); ++i) m[i] = mask_bytes[i];
    return MaskDataset(detail::normalise_pixels<InputShape>(image_bytes, norm, "MaskDataset"), std::move(m),
                       num_classes, ignore_index);
  }

  /// From an IDX file of (N, H, W) images (one channel) and one of (N, H, W) masks (class
  /// indices as bytes, IDX's image format), raw or .gz.
  static MaskDataset load(const std::filesystem::path& images, const std::filesystem::path& masks,
                          std::size_t num_classes, const Normalization& norm, std::int32_t ignore_index = -100) {
    static_assert(InputShape::extents[0] == 1, "MaskDataset::load: IDX images have one channel: Shape<1, H, W>");
    const IdxArray x = detail::read_idx_planes<InputShape>(images, "MaskDataset (images)");
    const IdxArray y = detail::read_idx_planes<InputShape>(masks, "MaskDataset (masks)");
    if (x.dims[0] != y.dims[0])
      throw FormatError(detail::concat(images.string(), " has ", x.dims[0], " images but ", masks.string(), " has ",
                                       y.dims[0], " masks"));
    try {
      return from_pixels(x.values, y.values, num_classes, norm, ignore_index);
    } catch (const ValueError& e) { // a bad mask value: name the file it came from
      throw FormatError(detail::concat(masks.string(), ": ", e.what()));
    }
  }

  std::size_t size() const noexcept { return masks_.size() / pixels; }
  std::size_t num_classes() const noexcept { return classes_; }
  std::int32_t ignore_index() const noexcept { return ignore_; }
  const float* image(std::size_t i) const noexcept { return images_.data() + i * InputShape::size; }
  const std::int32_t* mask(std::size_t i) const noexcept { return masks_.data() + i * pixels; }
  std::span<const float> images() const noexcept { return images_.span(); }
  std::span<const std::int32_t> masks() const noexcept { return masks_.span(); }

  /// Samples `indices` into `x` (indices.size() images) and `y` (their masks), each pair then
  /// transformed by `aug` as dataset sample indices[i] of draw.epoch under draw.seed.
  void load_batch(std::span<const std::size_t> indices, std::span<float> x, std::span<std::int32_t> y,
                  const JointAugmentation& aug = {}, const SampleDraw& draw = {}) const {
    detail::gather_samples(images_.data(), InputShape::size, indices, size(), x, "MaskDataset::load_batch");
    if (y.size() != indices.size() * pixels)
      throw ShapeError(detail::concat("MaskDataset::load_batch: ", indices.size(), " samples need ",
                                      indices.size() * pixels, " mask values, the output has ", y.size()));
    for (std::size_t i = 0; i < indices.size(); ++i) {
      std::copy_n(mask(indices[i]), pixels, y.data() + i * pixels);
      if (!aug.empty())
        aug.apply(x.subspan(i * InputShape::size, InputShape::size), dims(), y.subspan(i * pixels, pixels), draw.seed,
                  draw.epoch, indices[i]);
    }
  }

  static constexpr ImageDims dims() noexcept { return {InputShape::extents[0], height, width}; }

 private:
  HostBuffer<float> images_;       // (N, C, H, W)
  HostBuffer<std::int32_t> masks_; // (N, H, W)
  std::size_t classes_ = 0;
  std::int32_t ignore_ = -100;
};

/// Images of shape InputShape with a target image of shape TargetShape of the same height and
/// width (float, as the loss reads it: MSELoss, L1Loss, SmoothL1Loss, BCEWithLogitsLoss).
///
///     auto d = ImagePairDataset<Shape<1, 28, 28>>::copy_of(noisy, clean);   // denoising
template <ShapeType InputShape, ShapeType TargetShape = InputShape>
class ImagePairDataset {
  static_assert(InputShape::rank == 3 && TargetShape::rank == 3,
                "ImagePairDataset: inputs and targets must be images, Shape<C, H, W>");
  static_assert(InputShape::extents[1] == TargetShape::extents[1] && InputShape::extents[2] == TargetShape::extents[2],
                "ImagePairDataset: the target images must have the input images' height and width (a joint crop "
                "or flip moves both); the two shapes are the class's template arguments");

 public:
  using shape = InputShape;
  using target_shape = TargetShape;

  ImagePairDataset() = default;

  /// Takes images (N x InputShape::size floats) and targets (N x TargetShape::size floats).
  /// ShapeError when the counts disagree, ValueError for a target that is not finite.
  ImagePairDataset(HostBuffer<float> images, HostBuffer<float> targets)
      : images_(std::move(images)), targets_(std::move(targets)) {
    if (targets_.size() % TargetShape::size != 0 ||
        images_.size() != targets_.size() / TargetShape::size * InputShape::size)
      throw ShapeError(detail::concat("ImagePairDataset: ", targets_.size(), " target values (", TargetShape::str(),
                                      " each) and ", images_.size(), " image values (", InputShape::str(),
                                      " each) are not the same whole number of samples"));
    for (std::size_t i = 0; i < targets_.size(); ++i)
      if (!std::isfinite(targets_[i]))
        throw ValueError(detail::concat("ImagePairDataset: value ", i % TargetShape::size, " of sample ",
                                        i / TargetShape::size, "'s target is ", targets_[i],
                                        ", expected a finite number"));
  }

  static ImagePairDataset copy_of(std::span<const float> images, std::span<const float> targets) {
    return ImagePairDataset(detail::buffer_of(images), detail::buffer_of(targets));
  }

  /// From bytes, each side normalised with its own statistics (e.g. Normalization{} for targets
  /// in [0, 1], pixel / 255).
  static ImagePairDataset from_pixels(std::span<const std::uint8_t> image_bytes,
                                      std::span<const std::uint8_t> target_bytes, const Normalization& norm,
                                      const Normalization& target_norm = {}) {
    return ImagePairDataset(detail::normalise_pixels<InputShape>(image_bytes, norm, "ImagePairDataset"),
                            detail::normalise_pixels<TargetShape>(target_bytes, target_norm, "ImagePairDataset"));
  }

  /// From two IDX files of (N, H, W) bytes (one channel each).
  static ImagePairDataset load(const std::filesystem::path& images, const std::filesystem::path& targets,
                               const Normalization& norm, const Normalization& target_norm = {}) {
    static_assert(InputShape::extents[0] == 1 && TargetShape::extents[0] == 1,
                  "ImagePairDataset::load: IDX images have one channel: Shape<1, H, W> on both sides");
    const IdxArray x = detail::read_idx_planes<InputShape>(images, "ImagePairDataset (images)");
    const IdxArray t = detail::read_idx_planes<TargetShape>(targets, "ImagePairDataset (targets)");
    if (x.dims[0] != t.dims[0])
      throw FormatError(detail::concat(images.string(), " has ", x.dims[0], " images but ", targets.string(), " has ",
                                       t.dims[0], " targets"));
    return from_pixels(x.values, t.values, norm, target_norm);
  }

  std::size_t size() const noexcept { return targets_.size() / TargetShape::size; }
  const float* image(std::size_t i) const noexcept { return images_.data() + i * InputShape::size; }
  const float* target(std::size_t i) const noexcept { return targets_.data() + i * TargetShape::size; }
  std::span<const float> images() const noexcept { return images_.span(); }
  std::span<const float> targets() const noexcept { return targets_.span(); }

  /// Samples `indices` into `x` and `t`, each pair then transformed by `aug` (see MaskDataset).
  void load_batch(std::span<const std::size_t> indices, std::span<float> x, std::span<float> t,
                  const JointAugmentation& aug = {}, const SampleDraw& draw = {}) const {
    detail::gather_samples(images_.data(), InputShape::size, indices, size(), x, "ImagePairDataset::load_batch");
    detail::gather_samples(targets_.data(), TargetShape::size, indices, size(), t, "ImagePairDataset::load_batch");
    constexpr ImageDims s{InputShape::extents[0], InputShape::extents[1], InputShape::extents[2]};
    if (!aug.empty())
      for (std::size_t i = 0; i < indices.size(); ++i)
        aug.apply(x.subspan(i * InputShape::size, InputShape::size), s,
                  t.subspan(i * TargetShape::size, TargetShape::size), TargetShape::extents[0], draw.seed, draw.epoch,
                  indices[i]);
  }

 private:
  HostBuffer<float> images_, targets_;
};

namespace detail {
/// Instantiated with the dataset's sample shape and the network's input shape when they differ.
template <class DatasetShape, class NetworkInput>
struct dense_input_matches_network {
  static_assert(std::is_same_v<DatasetShape, NetworkInput>,
                "check_dense_data: the dataset's image shape is not the network's input shape (both named in "
                "dense_input_matches_network<dataset's, network's> below)");
};
/// The same for the network's per-pixel output against the targets' height and width.
template <class NetworkOutput, std::size_t H, std::size_t W>
struct dense_output_matches_targets {
  static_assert(NetworkOutput::rank == 3 && NetworkOutput::extents[1] == H && NetworkOutput::extents[2] == W,
                "check_dense_data: the network's output must be (C, H, W) with the targets' H and W (named in "
                "dense_output_matches_targets<network's output, H, W> below)");
};
} // namespace detail

/// The seam between a dense dataset and network Net, checked before any step: its image shape
/// against Net's input and its targets' height and width against Net's output at compile time;
/// then (MaskDataset) that Net scores every class, (ImagePairDataset) that Net's output is the
/// target shape. `name` ("train") goes into the message.
template <class Net, class Data>
void check_dense_data(const Data& data, const char* name = "dataset") {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  (void)sizeof(detail::dense_input_matches_network<typename Data::shape, In>);
  (void)sizeof(detail::dense_output_matches_targets<Out, In::extents[1], In::extents[2]>);
  if constexpr (requires { data.num_classes(); }) {
    if (data.num_classes() > Out::extents[0])
      throw ValueError(detail::concat("check_dense_data: the ", name, " masks have ", data.num_classes(),
                                      " classes, the network scores ", Out::extents[0], " per pixel (", Out::str(),
                                      ")"));
  } else {
    static_assert(std::is_same_v<Out, typename Data::target_shape>,
                  "check_dense_data: the network's output shape is not the dataset's target shape");
  }
}

} // namespace cohort
