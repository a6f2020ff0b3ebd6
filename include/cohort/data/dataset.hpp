#pragma once
/// \file
/// In-memory image classification datasets for a network whose input shape is a type.
/// Example (compiled: tests/docs/headers.cpp, "data/dataset"):
///
///     using Data = cohort::ImageDataset<cohort::Shape<1, 28, 28>>;
///     const auto files = cohort::find_idx_files(cohort::default_data_dir, cohort::Split::train);
///     auto train = Data::load(files, 10, cohort::Normalization{0.2860f, 0.3530f});
///     auto epoch = train.repeated(4);   // 240000 samples, no copy (sample i is sample i % 60000)
///
/// Loading checks that images and labels agree in count, that every label is a class of the
/// network (`FormatError`, naming file, sample and label) and that the images have the
/// network's height and width (`ShapeError`: the file is a valid IDX file, the network was
/// built for another size). Pixels are stored normalised, as float, one contiguous sample after
/// another. Colour images (C channels, CHW) come from `ImageDataset::from_pixels` with one mean
/// and std per channel (`Normalization::per_channel`, `Normalization::of(bytes, C, H * W)`);
/// data/cifar.hpp reads CIFAR-10/100 that way.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/data/idx.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Where Debian's dataset-fashion-mnist package installs Fashion-MNIST (gzip-compressed IDX).
inline const std::filesystem::path default_data_dir = "/usr/share/datasets/fashion-mnist";

/// Which half of an MNIST-style directory: "train-*" (60000 samples) or "t10k-*" (10000).
enum class Split { train, test };

/// The image and label files of one split.
///
///     IdxFiles f = find_idx_files(default_data_dir, Split::test);   // .../t10k-images-idx3-ubyte.gz, ...
struct IdxFiles {
  std::filesystem::path images;
  std::filesystem::path labels;
};

/// Finds the standard MNIST file names of `split` in `dir`, preferring the raw file
/// ("train-images-idx3-ubyte") to the compressed one ("train-images-idx3-ubyte.gz").
/// Throws IoError, listing the names looked for, when neither exists.
inline IdxFiles find_idx_files(const std::filesystem::path& dir = default_data_dir, Split split = Split::train) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  auto find = [&](const std::string& what, const std::string& stem) {
    const auto raw = dir / stem, gz = dir / (stem + ".gz");
    std::error_code ec;
    if (std::filesystem::is_regular_file(raw, ec)) return raw;
    if (std::filesystem::is_regular_file(gz, ec)) return gz;
    throw IoError(detail::concat(dir.string(), ": no ", prefix, " ", what, " file: looked for ", stem, " and ", stem,
                                 ".gz",
                                 std::filesystem::is_directory(dir, ec) ? "" : " (the directory does not exist)"));
  };
  return {find("images", prefix + "-images-idx3-ubyte"), find("labels", prefix + "-labels-idx1-ubyte")};
}

/// How pixels become network inputs: (pixel / 255 - mean) / std, in float, in that order
/// (torchvision's ToTensor followed by Normalize, so inputs match PyTorch's bit for bit). One
/// mean and std for every channel (the scalar form), or one per channel of CHW images:
///
///     Normalization n = Normalization::of(read_idx(images_path, idx_images_magic));   // scalar
///     Normalization rgb = Normalization::per_channel({0.4914f, 0.4822f, 0.4465f}, {0.247f, 0.243f, 0.261f});
struct Normalization {
  float mean = 0.f;
  float std = 1.f;
  /// Channel c of a CHW image uses channel_mean[c] and channel_std[c] (torchvision's
  /// Normalize(mean=[...], std=[...])); empty: `mean` and `std` for every channel.
  std::vector<float> channel_mean{};
  std::vector<float> channel_std{};

  /// C means and C standard deviations (ValueError if the counts differ or are 0).
  static Normalization per_channel(std::vector<float> means, std::vector<float> stds) {
    if (means.empty() || means.size() != stds.size())
      throw ValueError(detail::concat("Normalization::per_channel: expected as many stds as means (at least one), got ",
                                      means.size(), " means and ", stds.size(), " stds"));
    Normalization n;
    n.channel_mean = std::move(means);
    n.channel_std = std::move(stds);
    return n;
  }

  /// The number of channels this normalisation is for; 0 for the scalar form (any number).
  std::size_t channels() const noexcept { return channel_mean.size(); }
  float mean_of(std::size_t channel) const noexcept {
    return channel_mean.empty() ? mean : channel_mean[channel < channel_mean.size() ? channel : 0];
  }
  float std_of(std::size_t channel) const noexcept {
    return channel_std.empty() ? std : channel_std[channel < channel_std.size() ? channel : 0];
  }

  /// The mean and (population) standard deviation of pixel / 255 over every byte of `pixels`:
  /// what a trainer normalises both splits with. A constant image set gets std 1, so that
  /// normalising only shifts it.
  static Normalization of(std::span<const std::uint8_t> pixels) {
    if (pixels.empty()) return {};
    // A histogram makes the sums exact (integers) and the pass cheap.
    std::array<std::uint64_t, 256> count{};
    for (const auto p : pixels) ++count[p];
    return from_histogram(count);
  }
  static Normalization of(const IdxArray& images) { return of(std::span<const std::uint8_t>(images.values)); }

  /// Per-channel statistics of (N, C, H, W) bytes, `plane` = H * W: channel c's mean and
  /// standard deviation over the N * plane bytes of that channel, each as of() computes them
  /// (torchvision recipes' per-channel mean/std of the training set). ShapeError if the bytes
  /// are not whole images.
  static Normalization of(std::span<const std::uint8_t> pixels, std::size_t channels, std::size_t plane) {
    if (channels == 0 || plane == 0 || pixels.size() % (channels * plane) != 0)
      throw ShapeError(detail::concat("Normalization::of: ", pixels.size(), " bytes are not whole images of ", channels,
                                      " channel(s) x ", plane, " pixels"));
    std::vector<std::array<std::uint64_t, 256>> count(channels, std::array<std::uint64_t, 256>{});
    for (std::size_t i = 0; i < pixels.size(); ++i) ++count[(i / plane) % channels][pixels[i]];
    std::vector<float> means(channels), stds(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      const Normalization one = pixels.empty() ? Normalization{} : from_histogram(count[c]);
      means[c] = one.mean;
      stds[c] = one.std;
    }
    return per_channel(std::move(means), std::move(stds));
  }

  /// The 256 possible inputs of channel `channel`, indexed by pixel value. ValueError for a
  /// channel this normalisation does not have, or a non-finite mean or std <= 0.
  std::array<float, 256> table(std::size_t channel = 0) const {
    if (channel_mean.size() != channel_std.size() || (!channel_mean.empty() && channel >= channel_mean.size()))
      throw ValueError(detail::concat("Normalization: no statistics for channel ", channel, " (", channel_mean.size(),
                                      " means, ", channel_std.size(), " stds)"));
    const float m = mean_of(channel), s = std_of(channel);
    if (!std::isfinite(m) || !std::isfinite(s) || !(s > 0))
      throw ValueError(detail::concat("Normalization: std must be positive and finite, mean finite; got mean ", m,
                                      ", std ", s,
                                      channel_mean.empty() ? "" : detail::concat(" (channel ", channel, ")")));
    std::array<float, 256> t{};
    for (std::size_t v = 0; v < 256; ++v) t[v] = (float(v) / 255.f - m) / s;
    return t;
  }

  /// Pixel value `pixel` of channel `channel` as the network sees it: table(channel)[pixel]. A
  /// raw 0 pixel (torchvision's padding fill) is normalized(0, c) = -mean_c / std_c, not 0.
  float normalized(std::uint8_t pixel, std::size_t channel = 0) const {
    const float m = mean_of(channel), s = std_of(channel);
    return (float(pixel) / 255.f - m) / s;
  }

 private:
  static Normalization from_histogram(const std::array<std::uint64_t, 256>& count) {
    double n = 0, mean = 0;
    for (std::size_t v = 0; v < 256; ++v) {
      n += double(count[v]);
      mean += double(count[v]) * (double(v) / 255.0);
    }
    if (n == 0) return {};
    mean /= n;
    double var = 0;
    for (std::size_t v = 0; v < 256; ++v) {
      const double d = double(v) / 255.0 - mean;
      var += double(count[v]) * d * d;
    }
    const double sd = std::sqrt(var / n);
    return {float(mean), sd > 0 ? float(sd) : 1.f};
  }
};

template <ShapeType InputShape>
class RepeatedView;

/// N samples of shape `InputShape` as normalised float (N x InputShape::size, contiguous,
/// 64-byte aligned) and their int32 labels in [0, num_classes).
///
///     auto test = ImageDataset<Shape<1, 28, 28>>::load(images, labels, 10, norm);
///     const float* x = test.image(7);   // 784 floats
///     std::int32_t y = test.label(7);
template <ShapeType InputShape>
class ImageDataset {
 public:
  using shape = InputShape;

  ImageDataset() = default;

  /// Takes samples already in memory (synthetic data, tests): `images` holds
  /// `labels.size() * InputShape::size` floats. ShapeError if the sizes disagree, ValueError for
  /// a label outside [0, num_classes).
  ImageDataset(HostBuffer<float> images, HostBuffer<std::int32_t> labels, std::size_t num_classes)
      : images_(std::move(images)), labels_(std::move(labels)), classes_(num_classes) {
    if (classes_ == 0) throw ValueError("ImageDataset: num_classes must be at least 1");
    if (images_.size() != labels_.size() * InputShape::size)
      throw ShapeError(detail::concat("ImageDataset: ", labels_.size(), " labels need ",
                                      labels_.size() * InputShape::size, " floats of images (", InputShape::str(),
                                      " each), found ", images_.size()));
    for (std::size_t i = 0; i < labels_.size(); ++i)
      if (labels_[i] < 0 || std::size_t(labels_[i]) >= classes_)
        throw ValueError(detail::concat("ImageDataset: label of sample ", i, " is ", labels_[i],
                                        ", expected a class in [0, ", classes_, ")"));
  }

  /// A copy of samples in the caller's memory (floats already normalised), which the dataset
  /// then owns: `images` holds labels.size() samples of InputShape::size floats. To train on the
  /// caller's memory without a copy: ImageView (data/image_view.hpp).
  ///
  ///     auto d = ImageDataset<Shape<1, 28, 28>>::copy_of(pixels, labels, 10);   // spans or vectors
  static ImageDataset copy_of(std::span<const float> images, std::span<const std::int32_t> labels,
                              std::size_t num_classes) {
    HostBuffer<float> x(images.size());
    std::copy(images.begin(), images.end(), x.data());
    HostBuffer<std::int32_t> y(labels.size());
    std::copy(labels.begin(), labels.end(), y.data());
    return ImageDataset(std::move(x), std::move(y), num_classes);
  }

  /// Reads an IDX image file and an IDX label file (raw or .gz) and normalises the pixels.
  static ImageDataset load(const std::filesystem::path& images, const std::filesystem::path& labels,
                           std::size_t num_classes, Normalization norm) {
    const auto x = read_idx(images, idx_images_magic);
    const auto y = read_idx(labels, idx_labels_magic);
    return from_idx(x, y, num_classes, norm);
  }
  static ImageDataset load(const IdxFiles& files, std::size_t num_classes, Normalization norm) {
    return load(files.images, files.labels, num_classes, norm);
  }

  /// Builds the dataset from IDX arrays already read (e.g. after computing
  /// `Normalization::of(images)` from the same array).
  static ImageDataset from_idx(const IdxArray& images, const IdxArray& labels, std::size_t num_classes,
                               Normalization norm) {
    static_assert(InputShape::rank == 3 && InputShape::extents[0] == 1,
                  "ImageDataset: IDX images have one channel; the network input must be Shape<1, H, W>");
    constexpr std::size_t H = InputShape::extents[1], W = InputShape::extents[2];
    if (num_classes == 0) throw ValueError("ImageDataset: num_classes must be at least 1");
    // read_idx guarantees the ranks; arrays built by hand might not.
    if (images.dims.size() != 3 || labels.dims.size() != 1 ||
        images.values.size() != images.dims[0] * images.dims[1] * images.dims[2] ||
        labels.values.size() != labels.dims[0])
      throw ShapeError(detail::concat("ImageDataset: expected (N, H, W) images and (N) labels, found ",
                                      detail::idx_dims_string(images.dims), " in ", images.path.string(), " and ",
                                      detail::idx_dims_string(labels.dims), " in ", labels.path.string()));
    const std::size_t n = images.dims[0];
    if (labels.dims[0] != n)
      throw FormatError(detail::concat(images.path.string(), " has ", n, " images but ", labels.path.string(), " has ",
                                       labels.dims[0], " labels"));
    if (images.dims[1] != H || images.dims[2] != W)
      throw ShapeError(detail::concat(images.path.string(), ": network expects ", InputShape::str(), ", file has ",
                                      images.dims[1], "x", images.dims[2]));
    HostBuffer<std::int32_t> y(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (labels.values[i] >= num_classes)
        throw FormatError(detail::concat(labels.path.string(), ": label of sample ", i, " is ",
                                         unsigned(labels.values[i]), ", expected a class in [0, ", num_classes, ")"));
      y[i] = labels.values[i];
    }
    if (norm.channels() > 1)
      throw ValueError(detail::concat(images.path.string(), ": IDX images have one channel, the normalisation has ",
                                      norm.channels()));
    const auto table = norm.table();
    HostBuffer<float> x(images.values.size());
    for (std::size_t i = 0; i < images.values.size(); ++i) x[i] = table[images.values[i]];
    ImageDataset d;
    d.images_ = std::move(x);
    d.labels_ = std::move(y);
    d.classes_ = num_classes;
    return d;
  }

  /// Builds the dataset from bytes in memory: `pixels` holds N images of InputShape (C, H, W),
  /// row-major, channel after channel (a CIFAR record's layout), `labels` their N classes.
  /// Channel c is normalised with norm's channel c (or its scalar form). ShapeError if the
  /// sizes disagree, ValueError if the normalisation has another channel count or a label is
  /// not a class.
  ///
  ///     auto d = ImageDataset<Shape<3, 32, 32>>::from_pixels(bytes, std::move(labels), 10, norm);
  static ImageDataset from_pixels(std::span<const std::uint8_t> pixels, HostBuffer<std::int32_t> labels,
                                  std::size_t num_classes, const Normalization& norm) {
    static_assert(InputShape::rank == 3, "ImageDataset::from_pixels: the network input must be Shape<C, H, W>");
    constexpr std::size_t C = InputShape::extents[0], plane = InputShape::extents[1] * InputShape::extents[2];
    if (pixels.size() != labels.size() * InputShape::size)
      throw ShapeError(detail::concat("ImageDataset: ", labels.size(), " labels need ",
                                      labels.size() * InputShape::size, " bytes of images (", InputShape::str(),
                                      " each), found ", pixels.size()));
    if (norm.channels() != 0 && norm.channels() != C)
      throw ValueError(detail::concat("ImageDataset: the images have ", C, " channel(s) (", InputShape::str(),
                                      "), the normalisation has ", norm.channels()));
    std::vector<std::array<float, 256>> tables;
    for (std::size_t c = 0; c < C; ++c) tables.push_back(norm.table(c));
    HostBuffer<float> x(pixels.size());
    for (std::size_t i = 0; i < pixels.size(); ++i) x[i] = tables[(i / plane) % C][pixels[i]];
    return ImageDataset(std::move(x), std::move(labels), num_classes);
  }

  /// from_pixels with the labels in the caller's memory (copied).
  static ImageDataset from_pixels(std::span<const std::uint8_t> pixels, std::span<const std::int32_t> labels,
                                  std::size_t num_classes, const Normalization& norm) {
    HostBuffer<std::int32_t> y(labels.size());
    std::copy(labels.begin(), labels.end(), y.data());
    return from_pixels(pixels, std::move(y), num_classes, norm);
  }

  std::size_t size() const noexcept { return labels_.size(); }
  std::size_t num_classes() const noexcept { return classes_; }
  /// Sample `i`'s InputShape::size floats; `i < size()`.
  const float* image(std::size_t i) const noexcept { return images_.data() + i * InputShape::size; }
  std::int32_t label(std::size_t i) const noexcept { return labels_[i]; }
  /// Every sample, (N, InputShape...) row-major.
  std::span<const float> images() const noexcept { return images_.span(); }
  std::span<const std::int32_t> labels() const noexcept { return labels_.span(); }

  /// This dataset `times` times over without copying (the seed benchmark's 1x / 4x / 8x). The
  /// view refers to `*this`, which must outlive it.
  RepeatedView<InputShape> repeated(std::size_t times) const& { return RepeatedView<InputShape>(*this, times); }
  RepeatedView<InputShape> repeated(std::size_t times) const&& = delete; // would dangle

 private:
  HostBuffer<float> images_;        // (N, InputShape...)
  HostBuffer<std::int32_t> labels_; // (N)
  std::size_t classes_ = 0;
};

/// A dataset seen `times` times over, as PyTorch's ConcatDataset([d] * times): sample i is
/// sample i % d.size() of the underlying dataset. Refers to the dataset; copies nothing.
///
///     RepeatedView<Shape<1, 28, 28>> big(train, 8);   // big.size() == 8 * train.size()
template <ShapeType InputShape>
class RepeatedView {
 public:
  using shape = InputShape;

  RepeatedView(const ImageDataset<InputShape>& base, std::size_t times) : base_(&base), times_(times) {
    if (times == 0) throw ValueError("RepeatedView: times must be at least 1");
    if (base.size() != 0 && times > std::numeric_limits<std::size_t>::max() / base.size())
      throw ValueError(detail::concat("RepeatedView: ", base.size(), " samples x ", times, " overflows"));
  }
  RepeatedView(const ImageDataset<InputShape>&&, std::size_t) = delete; // would dangle

  std::size_t size() const noexcept { return base_->size() * times_; }
  std::size_t times() const noexcept { return times_; }
  std::size_t num_classes() const noexcept { return base_->num_classes(); }
  const ImageDataset<InputShape>& base() const noexcept { return *base_; }
  /// The index in the underlying dataset of sample `i`.
  std::size_t source_index(std::size_t i) const noexcept { return i % base_->size(); }
  const float* image(std::size_t i) const noexcept { return base_->image(source_index(i)); }
  std::int32_t label(std::size_t i) const noexcept { return base_->label(source_index(i)); }

 private:
  const ImageDataset<InputShape>* base_;
  std::size_t times_;
};

} // namespace cohort
