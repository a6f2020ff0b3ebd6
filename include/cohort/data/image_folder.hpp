#pragma once
/// \file
/// A folder of PNG and JPEG images in torchvision's ImageFolder layout (`root/<class>/<image>`),
/// decoded and transformed on worker threads while the network trains. Part of cohort's optional
/// image component (data/image_decode.hpp: libpng and libjpeg-turbo, CMake target cohort::image).
/// Example (compiled: tests/docs/headers.cpp, "data/image_folder"):
///
///     using Input = cohort::Shape<3, 32, 32>;                      // the network's input
///     auto train = cohort::ImageFolder<Input>::open("data/train", {
///         .crop = cohort::FolderCrop::random_resized, .horizontal_flip = true,
///         .normalization = cohort::Normalization::per_channel({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f})});
///     auto test = cohort::ImageFolder<Input>::open("data/val", {.resize = 36});   // + center crop
///     trainer.fit(train, 10, &test);                                // decoded on 2 worker threads
///
/// What torchvision does, cohort does: classes are the subdirectories of root sorted by name
/// (byte order: Python's sort of the names), class i's label is i, its files are found
/// recursively (following symbolic links) in the order `sorted(os.walk(...))` then
/// `sorted(files)` gives, hidden files and directories included (torchvision counts a stray
/// ".ipynb_checkpoints" as a class too). Pixels are PIL's (data/image_decode.hpp), transforms are
/// torchvision's on PIL images (data/image_transforms.hpp), in this order: Resize(resize) of the
/// shorter side, then the crop to the network's H x W (CenterCrop, RandomResizedCrop(scale,
/// ratio), or none: the image must then already be H x W), RandomHorizontalFlip, ToTensor and
/// Normalize. Random transforms draw from (trainer seed, epoch, sample index): a sample's pixels
/// never depend on the batch, the worker that decoded it, the number of workers or the world
/// size, and a resumed run sees the images an uninterrupted one would have.
///
/// Checks: `open` finds every file and, by default, reads every header (`FolderCheck::headers`):
/// an empty, truncated-header, mislabelled (a PNG named .jpg), undecodable or oversized file, a
/// file in a format cohort does not decode (.bmp, .tif, .webp, ...) and, without a crop, an image
/// that would not come out H x W are errors naming the file, before any step. A file whose
/// pixel data is damaged is found when it is decoded (the batch that holds it is never trained
/// on); `FolderCheck::decode` decodes everything at open to find those too. With
/// `BadFiles::skip`, files that fail the checks at open are left out and listed in skipped().
/// The Trainer records the class list and saves it with checkpoints; resuming on a folder with
/// other classes (or in another order) is refused.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/data/augment.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/data/detail/decode_workers.hpp"
#include "cohort/data/image_decode.hpp"
#include "cohort/data/image_transforms.hpp"

namespace cohort {

/// How an image becomes the network's H x W.
enum class FolderCrop {
  center,         ///< torchvision's CenterCrop((H, W)) (zero padding when the image is smaller)
  random_resized, ///< RandomResizedCrop((H, W), scale, ratio), bilinear
  none            ///< the image (after resize) must be H x W already: checked at open
};
/// What open() reads of every file.
enum class FolderCheck {
  headers, ///< the header: format, extension, dimensions (cheap; the default)
  decode,  ///< everything: damaged pixel data is found before training too
  none     ///< nothing (names only): errors surface when a batch decodes the file
};
/// What open() does with a file that fails its check.
enum class BadFiles {
  error, ///< throw, naming the file (the default)
  skip   ///< leave it out and list it in skipped()
};

struct ImageFolderOptions {
  /// torchvision's Resize(resize): the shorter side becomes `resize` (bilinear, antialiased). 0: no resize.
  std::size_t resize = 0;
  FolderCrop crop = FolderCrop::center;
  /// RandomResizedCrop's area fraction and aspect-ratio ranges (torchvision's defaults).
  std::pair<double, double> scale{0.08, 1.0};
  std::pair<double, double> ratio{3.0 / 4.0, 4.0 / 3.0};
  /// RandomHorizontalFlip(0.5).
  bool horizontal_flip = false;
  /// Normalize(mean, std) after ToTensor: one mean and std, or one per channel.
  Normalization normalization{};
  /// Decoding threads (0: decode on the thread that gathers the batch, the Trainer's prefetch thread).
  std::size_t workers = 2;
  FolderCheck check = FolderCheck::headers;
  BadFiles bad_files = BadFiles::error;
  DecodeLimits limits{};
  /// Keep every decoded image (8-bit, before the transforms) after its first decode: from the
  /// second epoch on no file is read or decoded, and random crops and flips still vary. Costs
  /// width x height x channels bytes per image (47 MB for Fashion-MNIST's 60,000 28x28 images;
  /// for large photos, prefer resize, whose output is what is kept). Off by default.
  bool cache = false;
};

/// A file open() left out (BadFiles::skip), and why.
struct SkippedFile {
  std::filesystem::path path;
  std::string reason;
};

namespace detail {

inline bool decodable_extension(const std::string& ext) { return ext == ".png" || ext == ".jpg" || ext == ".jpeg"; }
/// torchvision's IMG_EXTENSIONS that cohort does not decode: refused rather than silently
/// dropped, so the sample list never differs from torchvision's without a word.
inline bool other_image_extension(const std::string& ext) {
  for (const char* e : {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (ext == e) return true;
  return false;
}

/// The files of one class directory in torchvision's order: directories by path, files by name.
inline std::vector<std::filesystem::path> class_files(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> found; // (directory, file name)
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
  if (ec) throw IoError(concat(dir.string(), ": cannot list the directory (", ec.message(), ")"));
  for (; it != end; it.increment(ec)) {
    if (ec) throw IoError(concat(dir.string(), ": cannot list the directory (", ec.message(), ")"));
    std::error_code fec;
    if (it->is_directory(fec)) continue;
    const fs::path& p = it->path();
    const std::string ext = lower_extension(p.native());
    if (decodable_extension(ext) || other_image_extension(ext))
      found.emplace_back(p.parent_path().string(), p.filename().string());
  }
  if (ec) throw IoError(concat(dir.string(), ": cannot list the directory (", ec.message(), ")"));
  std::sort(found.begin(), found.end()); // std::string's order is byte order: Python's sort of str
  std::vector<fs::path> out;
  out.reserve(found.size());
  for (auto& [d, f] : found) out.push_back(fs::path(d) / f);
  return out;
}

} // namespace detail

template <ShapeType InputShape>
class ImageFolder {
  static_assert(InputShape::rank == 3 && (InputShape::extents[0] == 1 || InputShape::extents[0] == 3),
                "ImageFolder: the network's input must be Shape<1, H, W> (gray, PIL's \"L\") or Shape<3, H, W> (RGB)");
  static constexpr std::size_t C = InputShape::extents[0], H = InputShape::extents[1], W = InputShape::extents[2];
  // The streams of the folder's random transforms (Augmentation's pipelines use 0..253).
  static constexpr std::size_t crop_stream = 254, flip_stream = 255;

 public:
  using shape = InputShape;

  /// Lists `root` (root/<class>/<images>) and checks it as options.check says. IoError if root
  /// or a directory cannot be read or a class has no image; FormatError (or a skip) per file.
  static ImageFolder open(const std::filesystem::path& root, ImageFolderOptions options = {}) {
    namespace fs = std::filesystem;
    ImageFolder f;
    f.root_ = root;
    f.options_ = std::move(options);
    const auto& o = f.options_;
    if (o.crop == FolderCrop::random_resized &&
        !(o.scale.first > 0 && o.scale.first <= o.scale.second && o.ratio.first > 0 && o.ratio.first <= o.ratio.second))
      throw ValueError(detail::concat("ImageFolder: RandomResizedCrop needs 0 < scale.first <= scale.second and 0 < "
                                      "ratio.first <= ratio.second; got scale (",
                                      o.scale.first, ", ", o.scale.second, "), ratio (", o.ratio.first, ", ",
                                      o.ratio.second, ")"));
    if (o.normalization.channels() != 0 && o.normalization.channels() != C)
      throw ValueError(detail::concat("ImageFolder: the network's input ", InputShape::str(), " has ", C,
                                      " channel(s), the normalisation has ", o.normalization.channels()));
    f.tables_ = detail::normalization_tables(o.normalization, C); // a bad std is an error now

    std::error_code ec;
    if (!fs::is_directory(root, ec))
      throw IoError(detail::concat(root.string(), ": not a directory (ImageFolder expects root/<class>/<images>)"));
    std::vector<std::string> classes;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code dec;
      if (it->is_directory(dec)) classes.push_back(it->path().filename().string());
    }
    if (ec) throw IoError(detail::concat(root.string(), ": cannot list the directory (", ec.message(), ")"));
    std::sort(classes.begin(), classes.end());
    if (classes.empty())
      throw IoError(
          detail::concat(root.string(), ": no class directories (ImageFolder expects root/<class>/<images>)"));

    std::vector<fs::path> files;
    std::vector<std::int32_t> labels;
    std::vector<std::string> empty;
    for (std::size_t k = 0; k < classes.size(); ++k) {
      const auto found = detail::class_files(root / classes[k]);
      if (found.empty()) empty.push_back(classes[k]);
      for (const auto& p : found) {
        files.push_back(p);
        labels.push_back(std::int32_t(k));
      }
    }
    if (!empty.empty())
      throw IoError(detail::concat(root.string(), ": no image in the class director", empty.size() > 1 ? "ies " : "y ",
                                   detail::quoted_list(empty), " (cohort reads .png, .jpg and .jpeg files)"));
    f.classes_ = std::move(classes);
    f.workers_ = std::make_unique<detail::DecodeWorkers>(o.workers);
    f.check_files(files, labels);
    return f;
  }

  ImageFolder(ImageFolder&&) noexcept = default;
  ImageFolder& operator=(ImageFolder&&) noexcept = default;

  std::size_t size() const noexcept { return files_.size(); }
  std::int32_t label(std::size_t i) const noexcept { return labels_[i]; }
  std::size_t num_classes() const noexcept { return classes_.size(); }
  /// Class i's directory name: label i.
  const std::vector<std::string>& class_names() const noexcept { return classes_; }
  const std::filesystem::path& path(std::size_t i) const noexcept { return files_[i]; }
  const std::filesystem::path& root() const noexcept { return root_; }
  const std::vector<SkippedFile>& skipped() const noexcept { return skipped_; }
  const ImageFolderOptions& options() const noexcept { return options_; }

  /// Sample i after decoding and the transforms, before ToTensor/Normalize: the PIL image a
  /// torchvision pipeline would hold (for tests and inspection).
  Image8 transformed_image(std::size_t i, const SampleDraw& draw = {}) const {
    const auto& o = options_;
    Image8 img = decoded(i);
    switch (o.crop) {
    case FolderCrop::center:
      if (img.width != W || img.height != H) img = center_crop(img, H, W);
      break;
    case FolderCrop::random_resized: {
      const AugmentRandom rng(draw.seed, draw.epoch, i, crop_stream);
      const CropBox b = random_resized_crop_box(img.width, img.height, o.scale, o.ratio, rng);
      img = resize_bilinear(crop(img, std::ptrdiff_t(b.top), std::ptrdiff_t(b.left), b.height, b.width), W, H);
      break;
    }
    case FolderCrop::none:
      check_uncropped_size(files_[i], img.width, img.height);
      break;
    }
    if (o.horizontal_flip && AugmentRandom(draw.seed, draw.epoch, i, flip_stream).uniform(0) < 0.5f)
      flip_horizontal(img);
    return img;
  }

  /// Writes samples `indices` (InputShape::size floats each) into `out`, decoded on the workers.
  /// Errors name the file; the lowest failing index's error is the one thrown.
  void load_samples(std::span<const std::size_t> indices, std::span<float> out, const SampleDraw& draw) const {
    if (out.size() != indices.size() * InputShape::size)
      throw ShapeError(detail::concat("ImageFolder::load_samples: ", indices.size(), " samples need ",
                                      indices.size() * InputShape::size, " floats, the destination has ", out.size()));
    for (const std::size_t i : indices)
      if (i >= files_.size())
        throw ValueError(detail::concat("ImageFolder::load_samples: sample ", i, " of a folder of ", files_.size()));
    workers_->run(indices.size(), [&](std::size_t k) {
      const Image8 img = transformed_image(indices[k], draw);
      detail::normalize_chw(img, tables_, out.subspan(k * InputShape::size, InputShape::size));
    });
  }

  /// Every sample decoded once, with `draw`'s random transforms, as an in-memory dataset (for
  /// small folders trained for many epochs without random transforms: decoding once is cheaper).
  ImageDataset<InputShape> to_memory(const SampleDraw& draw = {}) const {
    HostBuffer<float> x(size() * InputShape::size);
    std::vector<std::size_t> all(size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    load_samples(all, x.span(), draw);
    HostBuffer<std::int32_t> y(size());
    std::copy(labels_.begin(), labels_.end(), y.data());
    return ImageDataset<InputShape>(std::move(x), std::move(y), num_classes());
  }

 private:
  ImageFolder() = default;

  /// options.check on every file, on the workers; failures are thrown (lowest index first) or
  /// skipped.
  /// File i decoded to C channels and resized (options.resize): from the cache when it has it.
  Image8 decoded(std::size_t i) const {
    const auto& o = options_;
    if (o.cache && is_cached_[i]) return cached_[i];
    Image8 img = decode_image(read_into_thread_buffer(files_[i]), C, files_[i].native(), o.limits);
    if (o.resize) img = resize_shorter_side(img, o.resize);
    if (o.cache) {
      cached_[i] = img;
      is_cached_[i] = 1;
    }
    return img;
  }

  void check_files(std::vector<std::filesystem::path>& files, std::vector<std::int32_t>& labels) {
    const auto& o = options_;
    std::vector<std::string> problems(files.size());
    std::vector<char> bad(files.size(), 0); // not vector<bool>: workers write neighbouring entries
    workers_->run(files.size(), [&](std::size_t i) {
      try {
        check_file(files[i]);
      } catch (const Error& e) {
        if (o.bad_files == BadFiles::error) throw;
        problems[i] = e.what();
        bad[i] = 1; // each index written by one worker only; read after run() returns
      }
    });
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (bad[i]) {
        skipped_.push_back({files[i], problems[i]});
        continue;
      }
      files_.push_back(std::move(files[i]));
      labels_.push_back(labels[i]);
    }
    if (o.cache) {
      cached_.resize(files_.size());
      is_cached_.assign(files_.size(), 0);
    }
    if (files_.empty())
      throw IoError(detail::concat(root_.string(), ": every one of the ", files.size(),
                                   " image files failed its check; the first: ", skipped_.front().reason));
  }

  void check_file(const std::filesystem::path& p) const {
    const auto& o = options_;
    const std::string ext = detail::lower_extension(p.native());
    if (!detail::decodable_extension(ext))
      throw FormatError(detail::concat(p.string(), ": ", ext,
                                       " images are not decoded by cohort (PNG and JPEG are); convert the file or move "
                                       "it out of the folder"));
    if (o.check == FolderCheck::none) return;
    const std::span<const std::uint8_t> bytes = read_into_thread_buffer(p);
    const ImageInfo info = read_image_info(bytes, p.native(), o.limits);
    if (o.check == FolderCheck::decode) (void)decode_image(bytes, C, p.native(), o.limits);
    if (o.crop == FolderCrop::none) {
      std::size_t w = info.width, h = info.height;
      if (o.resize) std::tie(w, h) = shorter_side_size(w, h, o.resize);
      check_uncropped_size(p, w, h);
    }
  }

  /// File `p`'s bytes in this thread's buffer (valid until its next call on this thread): a
  /// worker decoding thousands of small files allocates once, not per file.
  static std::span<const std::uint8_t> read_into_thread_buffer(const std::filesystem::path& p) {
    thread_local std::vector<std::uint8_t> bytes;
    read_file_into(p, bytes);
    return bytes;
  }

  /// FolderCrop::none: the image (after the resize) must be the network's H x W.
  void check_uncropped_size(const std::filesystem::path& p, std::size_t w, std::size_t h) const {
    if (w != W || h != H)
      throw ShapeError(detail::concat(p.string(), ": the image is ", w, "x", h, " (width x height)",
                                      options_.resize ? " after the resize" : "", ", the network's input is ",
                                      InputShape::str(), "; crop it (FolderCrop::center) or resize it"));
  }

  std::filesystem::path root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::filesystem::path> files_;
  std::vector<std::int32_t> labels_;
  std::vector<SkippedFile> skipped_;
  std::vector<std::array<float, 256>> tables_; // options.normalization per channel (detail::normalize_chw)
  std::unique_ptr<detail::DecodeWorkers> workers_;
  // options.cache: image i's decoded (and resized) pixels once decoded. A batch's workers write
  // distinct entries, and batches run one at a time (DecodeWorkers::run), so no lock is needed.
  mutable std::vector<Image8> cached_;
  mutable std::vector<char> is_cached_;
};

} // namespace cohort
