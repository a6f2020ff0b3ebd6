#pragma once
/// \file
/// CIFAR-10 and CIFAR-100 in their binary format ("CIFAR-10 binary version" of
/// https://www.cs.toronto.edu/~kriz/cifar.html), loaded as 3x32x32 colour images.
/// Example (compiled: tests/docs/headers.cpp, "data/cifar"):
///
///     const auto train = cohort::read_cifar("cifar-10-batches-bin", cohort::CifarVariant::cifar10,
///                                           cohort::Split::train);
///     const auto norm = train.statistics();          // per-channel mean and std
///     auto train_set = train.dataset(norm);          // ImageDataset<Shape<3, 32, 32>>
///     auto test_set = cohort::load_cifar("cifar-10-batches-bin", cohort::CifarVariant::cifar10,
///                                        cohort::Split::test, norm);
///
/// A CIFAR-10 record is 1 label byte and 3072 pixel bytes: the 1024 red values of the 32x32
/// image row by row, then the 1024 green, then the 1024 blue (CHW, as the network wants them).
/// Its directory holds data_batch_1.bin .. data_batch_5.bin (training, 10000 records each),
/// test_batch.bin and batches.meta.txt (the 10 class names). A CIFAR-100 record has 2 label
/// bytes, the coarse class (of 20 superclasses) then the fine one (of 100), before the same
/// 3072 bytes; its files are train.bin and test.bin (and coarse_label_names.txt,
/// fine_label_names.txt). Which label the dataset uses is chosen with CifarLabels.
///
/// Errors: a missing file or directory is an IoError listing the names looked for; a file whose
/// size is not a positive multiple of the record size (an empty file, a truncated one, a file
/// of the other variant) or with a label outside the classes is a FormatError naming the file
/// (and the record, the label and the expected range).

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// Which CIFAR: 10 classes and 1 label byte per record, or 100 (20 coarse) and 2 label bytes.
enum class CifarVariant { cifar10, cifar100 };
/// CIFAR-100's two labels: the fine class (100) or the superclass (20). CIFAR-10 has only one.
enum class CifarLabels { fine, coarse };

/// The image shape of every CIFAR variant.
using CifarShape = Shape<3, 32, 32>;

namespace detail {
inline constexpr std::size_t cifar_pixels = 3 * 32 * 32; // 3072 bytes per image
inline const char* cifar_name(CifarVariant v) { return v == CifarVariant::cifar10 ? "CIFAR-10" : "CIFAR-100"; }
inline std::size_t cifar_label_bytes(CifarVariant v) { return v == CifarVariant::cifar10 ? 1 : 2; }
inline std::size_t cifar_record_size(CifarVariant v) { return cifar_label_bytes(v) + cifar_pixels; }
} // namespace detail

/// The number of classes of a variant with the chosen labels: 10, 100 (fine) or 20 (coarse).
inline std::size_t cifar_classes(CifarVariant v, CifarLabels l = CifarLabels::fine) {
  return v == CifarVariant::cifar10 ? 10 : l == CifarLabels::fine ? 100 : 20;
}

/// The binary files of one split in a CIFAR directory, in order: data_batch_1..5.bin or
/// test_batch.bin (CIFAR-10), train.bin or test.bin (CIFAR-100). IoError naming every file
/// that is missing (and saying so when the directory itself does not exist, or when it holds
/// the other variant's files).
inline std::vector<std::filesystem::path> find_cifar_files(const std::filesystem::path& dir, CifarVariant variant,
                                                           Split split) {
  std::vector<std::string> names;
  if (variant == CifarVariant::cifar10) {
    if (split == Split::train)
      for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
    else
      names.push_back("test_batch.bin");
  } else {
    names.push_back(split == Split::train ? "train.bin" : "test.bin");
  }
  std::vector<std::filesystem::path> found;
  std::string missing;
  std::error_code ec;
  for (const auto& n : names) {
    if (std::filesystem::is_regular_file(dir / n, ec))
      found.push_back(dir / n);
    else
      missing += (missing.empty() ? "" : ", ") + n;
  }
  if (missing.empty()) return found;
  std::string hint;
  if (!std::filesystem::is_directory(dir, ec))
    hint = " (the directory does not exist)";
  else if (variant == CifarVariant::cifar100 && std::filesystem::is_regular_file(dir / "data_batch_1.bin", ec))
    hint = " (the directory holds CIFAR-10's data_batch_*.bin: use CifarVariant::cifar10)";
  else if (variant == CifarVariant::cifar10 && std::filesystem::is_regular_file(dir / "train.bin", ec))
    hint = " (the directory holds CIFAR-100's train.bin: use CifarVariant::cifar100)";
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw IoError(detail::concat(dir.string(), ": no ", detail::cifar_name(variant), " ",
                               split == Split::train ? "training" : "test", " data: looked for ", all,
                               "; missing: ", missing, hint));
}

/// The class names of a CIFAR directory (batches.meta.txt, or CIFAR-100's fine_label_names.txt
/// / coarse_label_names.txt), one per non-empty line; empty if the file is not there.
inline std::vector<std::string> read_cifar_class_names(const std::filesystem::path& dir, CifarVariant variant,
                                                       CifarLabels labels = CifarLabels::fine) {
  const char* name = variant == CifarVariant::cifar10 ? "batches.meta.txt"
                     : labels == CifarLabels::fine    ? "fine_label_names.txt"
                                                      : "coarse_label_names.txt";
  std::vector<std::string> out;
  std::ifstream in(dir / name);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

/// CIFAR images and labels as read, before normalisation: what statistics() and dataset() use.
struct CifarData {
  std::vector<std::uint8_t> pixels; // (N, 3, 32, 32)
  HostBuffer<std::int32_t> labels;  // (N)
  std::size_t num_classes = 0;

  std::size_t size() const noexcept { return labels.size(); }
  /// Per-channel mean and standard deviation of pixel / 255 (Normalization::of per channel).
  Normalization statistics() const { return Normalization::of(pixels, 3, 32 * 32); }
  /// The normalised dataset for a network whose input is InputShape (which must be 3x32x32).
  template <ShapeType InputShape = CifarShape>
  ImageDataset<InputShape> dataset(const Normalization& norm) const {
    static_assert(std::is_same_v<InputShape, CifarShape>,
                  "CIFAR images are 3x32x32: the network input must be Input<3, 32, 32> (Shape<3, 32, 32>)");
    return ImageDataset<InputShape>::from_pixels(pixels, labels, num_classes, norm);
  }
};

/// Reads CIFAR binary files (all records of every file, in order). See the file comment for the
/// errors.
inline CifarData read_cifar(std::span<const std::filesystem::path> files, CifarVariant variant,
                            CifarLabels labels = CifarLabels::fine) {
  const std::size_t record = detail::cifar_record_size(variant), label_bytes = detail::cifar_label_bytes(variant);
  const std::size_t classes = cifar_classes(variant, labels);
  // CIFAR-100 keeps the coarse label in byte 0, the fine one in byte 1.
  const std::size_t label_at = variant == CifarVariant::cifar100 && labels == CifarLabels::fine ? 1 : 0;
  const char* label_kind = variant == CifarVariant::cifar10 ? "label"
                           : labels == CifarLabels::fine    ? "fine label"
                                                            : "coarse label";
  CifarData d;
  d.num_classes = classes;
  std::vector<std::int32_t> all_labels;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw IoError(detail::concat(path.string(), ": cannot open the ", detail::cifar_name(variant), " file"));
    const auto end = in.tellg();
    if (end < 0) throw IoError(detail::concat(path.string(), ": cannot tell the file's size"));
    const std::size_t size = std::size_t(end);
    if (size == 0)
      throw FormatError(detail::concat(path.string(), ": empty file, expected ", detail::cifar_name(variant),
                                       " records of ", record, " bytes (", label_bytes, " label byte",
                                       label_bytes > 1 ? "s" : "", " + 3072 pixel bytes)"));
    if (size % record != 0) {
      const CifarVariant other = variant == CifarVariant::cifar10 ? CifarVariant::cifar100 : CifarVariant::cifar10;
      const std::size_t other_record = detail::cifar_record_size(other);
      throw FormatError(detail::concat(
          path.string(), ": size ", size, " bytes is not a multiple of the ", detail::cifar_name(variant),
          " record size ", record, " (", label_bytes, " label byte", label_bytes > 1 ? "s" : "",
          " + 3072 pixel bytes): truncated",
          size % other_record == 0 ? detail::concat(", or a ", detail::cifar_name(other), " file (",
                                                    size / other_record, " records of ", other_record, " bytes)")
                                   : std::string(),
          "?"));
    }
    std::vector<char> bytes(size);
    in.seekg(0);
    if (!in.read(bytes.data(), std::streamsize(size)))
      throw IoError(detail::concat(path.string(), ": reading ", size, " bytes failed"));
    const std::size_t n = size / record;
    const std::size_t first = d.pixels.size();
    d.pixels.resize(first + n * detail::cifar_pixels);
    for (std::size_t r = 0; r < n; ++r) {
      const auto* rec = reinterpret_cast<const std::uint8_t*>(bytes.data()) + r * record;
      const unsigned label = rec[label_at];
      if (label >= classes)
        throw FormatError(detail::concat(path.string(), ": record ", r, " has ", label_kind, " ", label,
                                         ", expected a class in [0, ", classes, ") for ", detail::cifar_name(variant)));
      all_labels.push_back(std::int32_t(label));
      std::copy(rec + label_bytes, rec + record, d.pixels.begin() + std::ptrdiff_t(first + r * detail::cifar_pixels));
    }
  }
  d.labels = HostBuffer<std::int32_t>(all_labels.size());
  std::copy(all_labels.begin(), all_labels.end(), d.labels.data());
  return d;
}

/// Reads one split of a CIFAR directory (find_cifar_files, then read_cifar).
inline CifarData read_cifar(const std::filesystem::path& dir, CifarVariant variant, Split split,
                            CifarLabels labels = CifarLabels::fine) {
  const auto files = find_cifar_files(dir, variant, split);
  return read_cifar(std::span<const std::filesystem::path>(files), variant, labels);
}

/// One split of a CIFAR directory as a normalised dataset for a network whose input is
/// InputShape (3x32x32, checked at compile time).
///
///     auto test = load_cifar("cifar-100-binary", CifarVariant::cifar100, Split::test, norm, CifarLabels::coarse);
template <ShapeType InputShape = CifarShape>
ImageDataset<InputShape> load_cifar(const std::filesystem::path& dir, CifarVariant variant, Split split,
                                    const Normalization& norm, CifarLabels labels = CifarLabels::fine) {
  static_assert(std::is_same_v<InputShape, CifarShape>,
                "CIFAR images are 3x32x32: the network input must be Input<3, 32, 32> (Shape<3, 32, 32>)");
  return read_cifar(dir, variant, split, labels).template dataset<InputShape>(norm);
}

} // namespace cohort
