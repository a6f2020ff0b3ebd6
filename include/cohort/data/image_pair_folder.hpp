#pragma once
/// \file
/// An image-to-image dataset from two folders, `images/<name>.<png|jpg|jpeg>` and
/// `targets/<name>.<png|jpg|jpeg>` (noisy/clean, photo/depth map, low/high exposure), decoded
/// into an ImagePairDataset (data/dense_dataset.hpp). Part of cohort's optional image component
/// (data/image_decode.hpp: libpng, libjpeg-turbo; CMake target cohort::image).
/// Example (compiled: tests/docs/headers.cpp, "data/image_pair_folder"):
///
///     auto train = cohort::read_image_pair_folders<cohort::Shape<1, 28, 28>>(
///         "data/noisy", "data/clean", norm, /*target_norm=*/{});   // targets in [0, 1]
///
/// Both sides are decoded as PIL's `convert("L" | "RGB")` decodes them (gray for a Shape<1, H, W>
/// side, RGB for Shape<3, H, W>; the two sides may differ) and normalised, each with its own
/// Normalization: as `(ToTensor()(img) - mean) / std`. Pairs are the image files sorted by name
/// (byte order), each with the one target file of the same stem (.png, .jpg or .jpeg in any case); a missing target, or
/// two (a.png and a.jpg), is an IoError naming the files; targets without an image are not read. No resize: both must
/// already be the shapes' H x W (a ShapeError naming the file otherwise). Every file is decoded when the folders are
/// read, so every error comes before any step.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"
#include "cohort/data/dense_dataset.hpp"
#include "cohort/data/detail/paired_folders.hpp"
#include "cohort/data/image_decode.hpp"
#include "cohort/data/image_transforms.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

namespace detail {

/// Decodes `path` as a `Side`-shaped image into `out` (Side::size floats), normalised.
template <ShapeType Side>
void read_pair_side(const std::filesystem::path& path, std::vector<std::uint8_t>& bytes, const Normalization& norm,
                    std::span<float> out, const char* role) {
  constexpr std::size_t C = Side::extents[0], H = Side::extents[1], W = Side::extents[2];
  read_file_into(path, bytes);
  const Image8 img = decode_image(bytes, C, path.string());
  if (img.height != H || img.width != W)
    throw ShapeError(concat(path.string(), ": the ", role, " is ", img.height, "x", img.width, " (H x W), expected ",
                            Side::str(), " (resize the images and targets first)"));
  to_normalized_chw(img, norm, out);
}

} // namespace detail

/// Reads the pairs of `images_dir` and `targets_dir` (see the top of this file) into an
/// ImagePairDataset<InputShape, TargetShape>. IoError for a missing folder or target,
/// FormatError for a file that does not decode, ShapeError for a file of another size.
template <ShapeType InputShape, ShapeType TargetShape = InputShape>
ImagePairDataset<InputShape, TargetShape>
read_image_pair_folders(const std::filesystem::path& images_dir, const std::filesystem::path& targets_dir,
                        const Normalization& norm, const Normalization& target_norm = {}) {
  static_assert(InputShape::rank == 3 && (InputShape::extents[0] == 1 || InputShape::extents[0] == 3),
                "read_image_pair_folders: the images are decoded as gray (Shape<1, H, W>) or RGB (Shape<3, H, W>)");
  static_assert(TargetShape::rank == 3 && (TargetShape::extents[0] == 1 || TargetShape::extents[0] == 3),
                "read_image_pair_folders: the targets are decoded as gray (Shape<1, H, W>) or RGB (Shape<3, H, W>)");
  detail::check_pair_folders(images_dir, targets_dir, "read_image_pair_folders", "targets");
  const std::vector<std::filesystem::path> images = detail::sorted_image_files(images_dir);
  HostBuffer<float> pixels(images.size() * InputShape::size);
  HostBuffer<float> targets(images.size() * TargetShape::size);
  const detail::PartnerIndex target_of(targets_dir, {".png", ".jpg", ".jpeg"}, "target");
  std::vector<std::uint8_t> bytes;
  for (std::size_t n = 0; n < images.size(); ++n) {
    const std::filesystem::path& target = target_of(images[n]);
    detail::read_pair_side<InputShape>(images[n], bytes, norm,
                                       pixels.span().subspan(n * InputShape::size, InputShape::size), "image");
    detail::read_pair_side<TargetShape>(target, bytes, target_norm,
                                        targets.span().subspan(n * TargetShape::size, TargetShape::size), "target");
  }
  return ImagePairDataset<InputShape, TargetShape>(std::move(pixels), std::move(targets));
}

} // namespace cohort
