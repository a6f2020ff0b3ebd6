#pragma once
/// \file
/// A segmentation dataset from two folders, `images/<name>.<png|jpg|jpeg>` and
/// `masks/<name>.png` (the layout of VOC's JPEGImages / SegmentationClass, Cityscapes-style
/// exports and most labelling tools), decoded into a MaskDataset (data/dense_dataset.hpp). Part of
/// cohort's optional image component (data/image_decode.hpp: libpng, libjpeg-turbo; CMake target
/// cohort::image).
/// Example (compiled: tests/docs/headers.cpp, "data/mask_folder"):
///
///     auto train = cohort::read_mask_folders<cohort::Shape<3, 64, 64>>(
///         "data/images", "data/masks", /*classes=*/21, norm, /*ignore_index=*/255);
///
/// Images are decoded as PIL's `convert("L" | "RGB")` decodes them (data/image_decode.hpp) and
/// normalised; masks are read as `np.array(Image.open(mask))` reads them: the value of each pixel
/// of an 8-bit gray PNG, or its index (not its colour) in a palette PNG, is its class. Any other
/// mask (RGB, alpha, 16 bits, gray below 8 bits) is a FormatError naming the file: colour-coded
/// masks need a colour-to-class table first. The images must already be the network's H x W (no
/// resize: a mask cannot be resized by the image's interpolation) and each mask its image's size.
/// Pairs are the image files sorted by name (byte order), each with the mask of the same stem (.png in any case);
/// a missing mask is an IoError naming both paths, masks without an image are not read. Every
/// file is decoded when the folders are read, so every error comes before any step.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
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

/// Stage 1 for a mask: the header, and 1-, 2- and 4-bit palettes unpacked to one byte per index
/// (never expanded to colours). Returns false after a libpng error.
inline bool png_read_index_header(png_structp png, png_infop info, PngInput* in, PngLayout* out) {
  if (setjmp(in->jump.jump)) return false;
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  out->width = png_get_image_width(png, info);
  out->height = png_get_image_height(png, info);
  out->color_type = png_get_color_type(png, info);
  out->bit_depth = png_get_bit_depth(png, info);
  if (out->color_type == PNG_COLOR_TYPE_PALETTE && out->bit_depth < 8) png_set_packing(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->channels = png_get_channels(png, info);
  out->row_bytes = png_get_rowbytes(png, info);
  return true;
}

/// The class indices of a PNG mask, row-major; `width` and `height` receive its size.
inline std::vector<std::uint8_t> decode_mask_png(std::span<const std::uint8_t> bytes, const std::string& name,
                                                 std::size_t& width, std::size_t& height,
                                                 const DecodeLimits& limits = {}) {
  if (checked_format(bytes, name) != ImageFormat::png)
    throw FormatError(concat(name, ": masks must be PNG (JPEG's lossy compression changes class indices)"));
  PngReader r(bytes, name);
  PngInput& in = r.in;
  PngHandles& h = r.h;
  PngLayout lay;
  if (!png_read_index_header(h.png, h.info, &in, &lay)) fail_decode(name, "not a readable PNG", in.jump.message);
  check_dimensions(name, ImageFormat::png, lay.width, lay.height, limits);
  const bool palette = lay.color_type == PNG_COLOR_TYPE_PALETTE;
  const bool gray8 = lay.color_type == PNG_COLOR_TYPE_GRAY && lay.bit_depth == 8;
  if (!palette && !gray8)
    throw FormatError(concat(name, ": a mask must be an 8-bit gray or a palette PNG of class indices; this one is ",
                             lay.color_type == PNG_COLOR_TYPE_GRAY         ? "gray"
                             : lay.color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? "gray with alpha"
                             : lay.color_type == PNG_COLOR_TYPE_RGB        ? "RGB"
                                                                           : "RGBA",
                             " with ", lay.bit_depth, "-bit samples (map its colours to classes first)"));
  std::vector<std::uint8_t> indices(lay.row_bytes * lay.height);
  std::vector<png_bytep> rows(lay.height);
  for (std::size_t y = 0; y < lay.height; ++y) rows[y] = indices.data() + y * lay.row_bytes;
  if (!png_read_rows(h.png, h.info, &in, rows.data())) fail_decode(name, "corrupt or truncated PNG", in.jump.message);
  width = lay.width;
  height = lay.height;
  return indices; // one byte per pixel: row_bytes == width
}

} // namespace detail

/// Reads the pairs of `images_dir` and `masks_dir` (see the top of this file) into a
/// MaskDataset of `num_classes` classes; mask values equal to `ignore_index` (VOC: 255) are
/// kept as ignored pixels. IoError for a missing folder or mask, FormatError for a file that
/// does not decode or a mask value that is no class (naming the file, the pixel and the value),
/// ShapeError for an image or mask of another size than InputShape's H x W.
template <ShapeType InputShape>
MaskDataset<InputShape> read_mask_folders(const std::filesystem::path& images_dir,
                                          const std::filesystem::path& masks_dir, std::size_t num_classes,
                                          const Normalization& norm, std::int32_t ignore_index = -100) {
  static_assert(InputShape::rank == 3 && (InputShape::extents[0] == 1 || InputShape::extents[0] == 3),
                "read_mask_folders: the images are decoded as gray (Shape<1, H, W>) or RGB (Shape<3, H, W>)");
  constexpr std::size_t C = InputShape::extents[0], H = InputShape::extents[1], W = InputShape::extents[2];
  detail::check_pair_folders(images_dir, masks_dir, "read_mask_folders", "masks");
  const std::vector<std::filesystem::path> images = detail::sorted_image_files(images_dir);
  HostBuffer<float> pixels(images.size() * InputShape::size);
  HostBuffer<std::int32_t> masks(images.size() * H * W);
  const detail::PartnerIndex mask_of(masks_dir, {".png"}, "mask");
  std::vector<std::uint8_t> bytes;
  for (std::size_t n = 0; n < images.size(); ++n) {
    const std::filesystem::path& image = images[n];
    const std::filesystem::path& mask = mask_of(image);
    read_file_into(image, bytes);
    const Image8 img = decode_image(bytes, C, image.string());
    if (img.height != H || img.width != W)
      throw ShapeError(detail::concat(image.string(), ": the image is ", img.height, "x", img.width,
                                      " (H x W), the network's input is ", InputShape::str(),
                                      "; resize the images and masks (masks by nearest) first"));
    to_normalized_chw(img, norm, pixels.span().subspan(n * InputShape::size, InputShape::size));
    read_file_into(mask, bytes);
    std::size_t mw = 0, mh = 0;
    const std::vector<std::uint8_t> m = detail::decode_mask_png(bytes, mask.string(), mw, mh);
    if (mh != H || mw != W)
      throw ShapeError(detail::concat(mask.string(), ": the mask is ", mh, "x", mw, ", its image ", image.string(),
                                      " is ", H, "x", W));
    for (std::size_t p = 0; p < m.size(); ++p)
      if (const std::int32_t v = m[p]; v != ignore_index && std::size_t(v) >= num_classes)
        throw FormatError(detail::concat(mask.string(), ": pixel (", p / W, ", ", p % W, ") is ", v,
                                         ", expected a class in [0, ", num_classes, ") or the ignore_index ",
                                         ignore_index));
    std::copy(m.begin(), m.end(), masks.data() + n * H * W);
  }
  return MaskDataset<InputShape>(std::move(pixels), std::move(masks), num_classes, ignore_index);
}

} // namespace cohort
