#pragma once
/// \file
/// Transforms of decoded 8-bit images, computed as PIL and torchvision compute them, so that a
/// folder of images reaches the network with the pixels a torchvision pipeline would give it:
/// resize (PIL's bilinear filter with its antialiasing support and its fixed-point arithmetic),
/// torchvision's Resize(shorter side), CenterCrop, RandomResizedCrop's box, horizontal flip, and
/// ToTensor + Normalize into a CHW float sample. No codec is needed here (data/image_decode.hpp
/// decodes files).
/// Example (compiled: tests/docs/headers.cpp, "data/image_transforms"):
///
///     cohort::Image8 img(64, 48, 3);                          // width, height, channels (RGB)
///     img = cohort::resize_shorter_side(img, 32);             // 42x32, as Resize(32) gives
///     img = cohort::center_crop(img, 32, 32);
///     std::vector<float> x(3 * 32 * 32);
///     cohort::to_normalized_chw(img, cohort::Normalization{}, x);

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/data/augment.hpp"
#include "cohort/data/dataset.hpp"

namespace cohort {

/// An 8-bit image in PIL's memory layout: `height` rows of `width` pixels of `channels`
/// interleaved bytes (1: "L", 3: "RGB").
struct Image8 {
  std::size_t width = 0, height = 0, channels = 1;
  std::vector<std::uint8_t> pixels; // height * width * channels

  Image8() = default;
  Image8(std::size_t w, std::size_t h, std::size_t c) : width(w), height(h), channels(c), pixels(w * h * c) {}
  std::uint8_t& at(std::size_t y, std::size_t x, std::size_t c) noexcept {
    return pixels[(y * width + x) * channels + c];
  }
  std::uint8_t at(std::size_t y, std::size_t x, std::size_t c) const noexcept {
    return pixels[(y * width + x) * channels + c];
  }
};

namespace detail {

// Pillow's Resample.c: weights in 22-bit fixed point (32 - 8 bits of a pixel - 2 bits of
// headroom), rounded half away from zero, sums started at one half and clipped to a byte.
inline constexpr int pil_precision_bits = 32 - 8 - 2;

/// The taps of one output coordinate: source [first, first + count) with fixed-point weights.
struct ResampleTaps {
  std::vector<std::size_t> first, count;
  std::vector<std::int32_t> weights; // out * ksize
  std::size_t ksize = 0;
};

/// PIL's precompute_coeffs with the bilinear (triangle) filter, support 1 scaled by the
/// reduction factor: the antialiasing that makes a downscale average every source pixel.
inline ResampleTaps bilinear_taps(std::size_t in_size, std::size_t out_size) {
  const double scale = double(in_size) / double(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  ResampleTaps t;
  t.ksize = std::size_t(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(out_size * t.ksize, 0);
  std::vector<double> k(t.ksize);
  for (std::size_t xx = 0; xx < out_size; ++xx) {
    const double center = (double(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // (int)(v + 0.5) as PIL writes it: truncation toward zero, then clamped.
    long xmin = long(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    long xmax = long(center + support + 0.5);
    if (xmax > long(in_size)) xmax = long(in_size);
    xmax -= xmin;
    double ww = 0;
    std::fill(k.begin(), k.end(), 0.0);
    for (long x = 0; x < xmax; ++x) {
      double a = (double(x + xmin) - center + 0.5) * ss;
      if (a < 0) a = -a;
      const double w = a < 1.0 ? 1.0 - a : 0.0;
      k[std::size_t(x)] = w;
      ww += w;
    }
    for (long x = 0; x < xmax; ++x)
      if (ww != 0.0) k[std::size_t(x)] /= ww;
    for (std::size_t x = 0; x < t.ksize; ++x) {
      const double v = k[x] * double(1 << pil_precision_bits);
      t.weights[xx * t.ksize + x] = std::int32_t(v < 0 ? -0.5 + v : 0.5 + v);
    }
    t.first[xx] = std::size_t(xmin);
    t.count[xx] = std::size_t(xmax);
  }
  return t;
}

inline std::uint8_t pil_clip8(std::int32_t v) noexcept {
  const std::int32_t s = v >> pil_precision_bits; // arithmetic shift, as PIL's lookup index
  return std::uint8_t(s < 0 ? 0 : s > 255 ? 255 : s);
}

} // namespace detail

namespace detail {

/// One horizontal pass over rows [y0, y1) of `in` (PIL's ImagingResampleHorizontal_8bpc).
inline Image8 resample_rows(const Image8& in, const ResampleTaps& tx, std::size_t width, std::size_t y0,
                            std::size_t y1) {
  const std::size_t C = in.channels;
  Image8 out(width, y1 - y0, C);
  for (std::size_t y = y0; y < y1; ++y) {
    const std::uint8_t* row = in.pixels.data() + y * in.width * C;
    std::uint8_t* dst = out.pixels.data() + (y - y0) * width * C;
    for (std::size_t x = 0; x < width; ++x) {
      const std::int32_t* k = tx.weights.data() + x * tx.ksize;
      for (std::size_t c = 0; c < C; ++c) {
        std::int32_t sum = 1 << (pil_precision_bits - 1);
        for (std::size_t i = 0; i < tx.count[x]; ++i) sum += std::int32_t(row[(tx.first[x] + i) * C + c]) * k[i];
        dst[x * C + c] = pil_clip8(sum);
      }
    }
  }
  return out;
}

/// One vertical pass (PIL's ImagingResampleVertical_8bpc); `in`'s row 0 is source row `row0`.
inline Image8 resample_columns(const Image8& in, const ResampleTaps& ty, std::size_t height, std::size_t row0) {
  const std::size_t stride = in.width * in.channels;
  Image8 out(in.width, height, in.channels);
  for (std::size_t y = 0; y < height; ++y) {
    const std::int32_t* k = ty.weights.data() + y * ty.ksize;
    const std::size_t first = ty.first[y] - row0;
    for (std::size_t x = 0; x < stride; ++x) {
      std::int32_t sum = 1 << (pil_precision_bits - 1);
      for (std::size_t i = 0; i < ty.count[y]; ++i) sum += std::int32_t(in.pixels[(first + i) * stride + x]) * k[i];
      out.pixels[y * stride + x] = pil_clip8(sum);
    }
  }
  return out;
}

} // namespace detail

/// PIL's `Image.resize((width, height), Image.BILINEAR)` on an 8-bit image, bit for bit: two
/// passes, each rounding to bytes, in Pillow's order. Recent Pillow (13 here) runs the vertical
/// pass first when the height shrinks, and by more than twice as many pixels as the width:
/// in.height - height > max(0, 2 (in.width - width)); the horizontal one first otherwise (the
/// order changes the rounding; rule measured against Pillow 13 on every output size of 20x40,
/// 24x30, 30x30 and 40x20 images, checked by tests/data/image_transforms.cpp's fixtures).
/// ValueError for a zero size.
inline Image8 resize_bilinear(const Image8& in, std::size_t width, std::size_t height) {
  if (width == 0 || height == 0 || in.width == 0 || in.height == 0)
    throw ValueError(
        detail::concat("resize_bilinear: cannot resize ", in.width, "x", in.height, " to ", width, "x", height));
  const bool horizontal = width != in.width, vertical = height != in.height;
  if (!horizontal && !vertical) return in; // PIL returns a copy
  const detail::ResampleTaps ty = detail::bilinear_taps(in.height, height);
  if (!horizontal) return detail::resample_columns(in, ty, height, 0);
  const detail::ResampleTaps tx = detail::bilinear_taps(in.width, width);
  if (!vertical) return detail::resample_rows(in, tx, width, 0, in.height);
  const auto shrink_h = std::ptrdiff_t(in.height) - std::ptrdiff_t(height);
  const auto shrink_w = std::ptrdiff_t(in.width) - std::ptrdiff_t(width);
  if (shrink_h > 0 && shrink_h > 2 * shrink_w) {
    const Image8 tall = detail::resample_columns(in, ty, height, 0);
    return detail::resample_rows(tall, tx, width, 0, height);
  }
  // Only the rows the vertical pass reads (PIL's ybox_first..ybox_last); the result is the same.
  const std::size_t y0 = ty.first.front(), y1 = ty.first.back() + ty.count.back();
  return detail::resample_columns(detail::resample_rows(in, tx, width, y0, y1), ty, height, y0);
}

/// torchvision's Resize(size) output for an image of width x height: the shorter side becomes
/// `size`, the longer int(size * long / short) (truncated, as torchvision computes it).
inline std::pair<std::size_t, std::size_t> shorter_side_size(std::size_t width, std::size_t height,
                                                             std::size_t size) noexcept {
  const bool wide = width > height; // torchvision: short, long = (w, h) if w <= h else (h, w)
  const std::size_t s = wide ? height : width, l = wide ? width : height;
  const auto other = std::size_t(double(size) * double(l) / double(s));
  return wide ? std::pair{other, size} : std::pair{size, other};
}

/// torchvision's Resize(size) on a PIL image (bilinear, antialiased): the shorter side becomes size.
inline Image8 resize_shorter_side(const Image8& in, std::size_t size) {
  const auto [w, h] = shorter_side_size(in.width, in.height, size);
  return resize_bilinear(in, w, h);
}

/// The window [top, top + height) x [left, left + width) of `in`; pixels outside the image are 0
/// (PIL's Image.crop, torchvision's padding fill).
inline Image8 crop(const Image8& in, std::ptrdiff_t top, std::ptrdiff_t left, std::size_t height, std::size_t width) {
  Image8 out(width, height, in.channels);
  const std::size_t C = in.channels;
  for (std::size_t y = 0; y < height; ++y) {
    const std::ptrdiff_t sy = top + std::ptrdiff_t(y);
    if (sy < 0 || sy >= std::ptrdiff_t(in.height)) continue;
    const std::ptrdiff_t x0 = std::max<std::ptrdiff_t>(0, -left);
    const std::ptrdiff_t x1 = std::min<std::ptrdiff_t>(std::ptrdiff_t(width), std::ptrdiff_t(in.width) - left);
    if (x1 > x0)
      std::copy_n(in.pixels.data() + (std::size_t(sy) * in.width + std::size_t(left + x0)) * C,
                  std::size_t(x1 - x0) * C, out.pixels.data() + (y * width + std::size_t(x0)) * C);
  }
  return out;
}

/// torchvision's CenterCrop((height, width)): top = round((H - height) / 2) with Python's
/// round (half to even); an image smaller than the crop is padded with zeros first, the extra
/// pixel of an odd padding going to the bottom / right.
inline Image8 center_crop(const Image8& in, std::size_t height, std::size_t width) {
  auto offset = [](std::size_t have, std::size_t want) -> std::ptrdiff_t {
    if (want > have) return -std::ptrdiff_t((want - have) / 2);       // torchvision pads (want - have) // 2 before
    return std::ptrdiff_t(std::nearbyint(double(have - want) / 2.0)); // default rounding: half to even
  };
  return crop(in, offset(in.height, height), offset(in.width, width), height, width);
}

/// A crop window in the source image.
struct CropBox {
  std::size_t top = 0, left = 0, height = 0, width = 0;
  friend bool operator==(const CropBox&, const CropBox&) = default;
};

/// torchvision's RandomResizedCrop.get_params(scale, ratio) for a width x height image, drawing
/// from `rng` instead of torch's generator: up to 10 tries of an area fraction in [scale.first,
/// scale.second) and a log-uniform aspect ratio, then the central crop clamped to `ratio`.
/// Draws 2i and 2i + 1 are try i's area and ratio; 20 and 21 the window's position.
inline CropBox random_resized_crop_box(std::size_t width, std::size_t height, std::pair<double, double> scale,
                                       std::pair<double, double> ratio, const AugmentRandom& rng) {
  const double area = double(width) * double(height);
  const double log_r0 = std::log(ratio.first), log_r1 = std::log(ratio.second);
  for (std::uint32_t attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (scale.first + (scale.second - scale.first) * double(rng.uniform(2 * attempt)));
    const double aspect = std::exp(log_r0 + (log_r1 - log_r0) * double(rng.uniform(2 * attempt + 1)));
    const auto w = std::size_t(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = std::size_t(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height)
      return {rng.below(20, std::uint32_t(height - h + 1)), rng.below(21, std::uint32_t(width - w + 1)), h, w};
  }
  const double in_ratio = double(width) / double(height);
  std::size_t w = width, h = height;
  if (in_ratio < std::min(ratio.first, ratio.second))
    h = std::size_t(std::nearbyint(double(w) / std::min(ratio.first, ratio.second)));
  else if (in_ratio > std::max(ratio.first, ratio.second))
    w = std::size_t(std::nearbyint(double(h) * std::max(ratio.first, ratio.second)));
  return {(height - h) / 2, (width - w) / 2, h, w};
}

/// Mirrors the image left to right (torchvision's hflip).
inline void flip_horizontal(Image8& img) noexcept {
  const std::size_t C = img.channels;
  for (std::size_t y = 0; y < img.height; ++y) {
    std::uint8_t* row = img.pixels.data() + y * img.width * C;
    for (std::size_t a = 0, b = img.width ? img.width - 1 : 0; a < b; ++a, --b)
      for (std::size_t c = 0; c < C; ++c) std::swap(row[a * C + c], row[b * C + c]);
  }
}

namespace detail {
/// The normalisation of each of `channels` channels as a lookup table (pixel value -> float):
/// made once per data set instead of once per image. ValueError for a bad std.
inline std::vector<std::array<float, 256>> normalization_tables(const Normalization& norm, std::size_t channels) {
  std::vector<std::array<float, 256>> tables(channels);
  for (std::size_t c = 0; c < channels; ++c) tables[c] = norm.table(c);
  return tables;
}

/// to_normalized_chw through tables made beforehand; the sizes are the caller's to get right
/// (one table per channel, C * H * W floats).
inline void normalize_chw(const Image8& img, std::span<const std::array<float, 256>> tables, std::span<float> out) {
  const std::size_t C = img.channels, plane = img.width * img.height;
  for (std::size_t c = 0; c < C; ++c) {
    const std::array<float, 256>& table = tables[c];
    float* dst = out.data() + c * plane;
    const std::uint8_t* src = img.pixels.data() + c;
    for (std::size_t i = 0; i < plane; ++i) dst[i] = table[src[i * C]];
  }
}
} // namespace detail

/// ToTensor + Normalize: channel c of pixel (y, x) becomes out[(c * H + y) * W + x] =
/// (v / 255 - mean_c) / std_c in float, exactly as torchvision computes it. ShapeError if `out`
/// is not C * H * W floats or the normalisation has another channel count.
inline void to_normalized_chw(const Image8& img, const Normalization& norm, std::span<float> out) {
  const std::size_t C = img.channels, plane = img.width * img.height;
  if (out.size() != C * plane)
    throw ShapeError(detail::concat("to_normalized_chw: a ", C, "x", img.height, "x", img.width, " image needs ",
                                    C * plane, " floats, the destination has ", out.size()));
  if (norm.channels() != 0 && norm.channels() != C)
    throw ShapeError(
        detail::concat("to_normalized_chw: the image has ", C, " channel(s), the normalisation has ", norm.channels()));
  detail::normalize_chw(img, detail::normalization_tables(norm, C), out);
}

} // namespace cohort
