#pragma once
// Writes test images with libpng's simplified API (tests only: the library decodes, never
// encodes): an ImageFolder tree of band images whose class is the band's position.

#include <png.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace cohort::test {

/// Writes `pixels` (height rows of width * channels bytes; 1: gray, 3: RGB) as a PNG.
inline void write_png(const std::filesystem::path& path, std::size_t width, std::size_t height, std::size_t channels,
                      const std::vector<std::uint8_t>& pixels) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(width);
  img.height = static_cast<png_uint_32>(height);
  img.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  std::filesystem::create_directories(path.parent_path());
  if (!png_image_write_to_file(&img, path.c_str(), 0, pixels.data(), 0, nullptr))
    throw std::runtime_error("test: cannot write " + path.string() + ": " + img.message);
}

/// root/<class name>/<i>.png: `per_class` gray width x height images per class, class k a bright
/// horizontal band at rows [k * height / classes, ...) over noise (learnable in a few steps).
inline void write_band_folder(const std::filesystem::path& root, const std::vector<std::string>& classes,
                              std::size_t per_class, std::size_t width = 28, std::size_t height = 28,
                              unsigned seed = 1) {
  std::mt19937 g(seed);
  const std::size_t band = height / classes.size();
  for (std::size_t k = 0; k < classes.size(); ++k)
    for (std::size_t i = 0; i < per_class; ++i) {
      std::vector<std::uint8_t> px(width * height);
      for (std::size_t p = 0; p < px.size(); ++p)
        px[p] = static_cast<std::uint8_t>(g() % 60 + ((p / width) / band == k ? 180 : 0));
      write_png(root / classes[k] / (std::to_string(i) + ".png"), width, height, 1, px);
    }
}

} // namespace cohort::test
