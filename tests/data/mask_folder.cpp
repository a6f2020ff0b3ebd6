// Segmentation folders (data/mask_folder.hpp): images and PNG masks paired by name, gray and
// palette masks read as class indices (never colours), and every bad file named before any step.

#include <doctest/doctest.h>

#include <png.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <cohort/data/mask_folder.hpp>

#include "support/png_folder.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using MaskGray4 = Shape<1, 4, 4>;
using MaskGray8 = Shape<1, 8, 8>;
// A palette PNG of `indices` (libpng's simplified API; with few entries it packs them below 8
// bits, which the reader must unpack).
void write_palette_png(const fs::path& path, std::size_t width, std::size_t height,
                       const std::vector<std::uint8_t>& indices, std::size_t entries) {
  std::vector<std::uint8_t> colours(3 * entries);
  for (std::size_t i = 0; i < colours.size(); ++i) colours[i] = std::uint8_t(255 - 37 * i);
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = png_uint_32(width);
  img.height = png_uint_32(height);
  img.format = PNG_FORMAT_RGB_COLORMAP;
  img.colormap_entries = png_uint_32(entries);
  fs::create_directories(path.parent_path());
  if (!png_image_write_to_file(&img, path.c_str(), 0, indices.data(), 0, colours.data()))
    throw std::runtime_error("test: cannot write " + path.string() + ": " + img.message);
}
std::vector<std::uint8_t> mask_pattern(std::size_t n, std::size_t classes, std::size_t salt) {
  std::vector<std::uint8_t> m(n);
  for (std::size_t i = 0; i < n; ++i) m[i] = std::uint8_t((i * 5 + salt) % classes);
  return m;
}
std::vector<std::uint8_t> image_pattern(std::size_t n, std::size_t salt) {
  std::vector<std::uint8_t> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::uint8_t(i * 13 + salt * 29);
  return x;
}
} // namespace

TEST_CASE("read_mask_folders: gray images with gray masks, paired by name in sorted order") {
  test::TempDir dir("cohort_test_mask_folder_");
  const std::vector<std::string> names{"b", "a", "c"};
  for (std::size_t k = 0; k < names.size(); ++k) {
    test::write_png(dir.path / "images" / (names[k] + ".png"), 5, 4, 1, image_pattern(20, k));
    test::write_png(dir.path / "masks" / (names[k] + ".png"), 5, 4, 1, mask_pattern(20, 3, k));
  }
  test::write_png(dir.path / "masks" / "unpaired.png", 5, 4, 1, mask_pattern(20, 3, 0)); // not read
  const Normalization norm{0.4f, 0.2f};
  const auto d = read_mask_folders<Shape<1, 4, 5>>(dir.path / "images", dir.path / "masks", 3, norm);
  REQUIRE(d.size() == 3);
  const auto table = norm.table();
  // Sample 0 is "a" (written second, k = 1), sample 1 "b" (k = 0).
  const auto a = image_pattern(20, 1), b_mask = mask_pattern(20, 3, 0);
  for (std::size_t p = 0; p < 20; ++p) {
    CHECK(d.image(0)[p] == table[a[p]]);
    CHECK(d.mask(1)[p] == std::int32_t(b_mask[p]));
  }
}

TEST_CASE("read_mask_folders: RGB images with palette masks read as indices, 255 ignored") {
  test::TempDir dir("cohort_test_mask_folder_");
  std::vector<std::uint8_t> small = mask_pattern(6 * 3, 4, 2), big = mask_pattern(6 * 3, 21, 1);
  big[7] = 255;
  write_palette_png(dir.path / "m" / "x1.png", 6, 3, small, 4); // 4 entries: 2-bit indices
  write_palette_png(dir.path / "m" / "x2.png", 6, 3, big, 256); // 8-bit indices
  test::write_png(dir.path / "i" / "x1.png", 6, 3, 3, image_pattern(54, 0));
  test::write_png(dir.path / "i" / "x2.png", 6, 3, 3, image_pattern(54, 1));
  const auto d = read_mask_folders<Shape<3, 3, 6>>(dir.path / "i", dir.path / "m", 21, {}, 255);
  REQUIRE(d.size() == 2);
  for (std::size_t p = 0; p < 18; ++p) {
    CHECK(d.mask(0)[p] == std::int32_t(small[p]));
    CHECK(d.mask(1)[p] == std::int32_t(big[p]));
  }
  // CHW: channel 1 of pixel 0 is the image's second byte.
  CHECK(d.image(1)[18] == float(image_pattern(54, 1)[1]) / 255.f);
}

TEST_CASE("read_mask_folders: a missing, colour, out-of-range or mis-sized mask is an error naming the file") {
  test::TempDir dir("cohort_test_mask_folder_");
  const fs::path images = dir.path / "images", masks = dir.path / "masks";
  test::write_png(images / "a.png", 4, 4, 1, image_pattern(16, 0));
  CHECK_THROWS_WITH_AS(read_mask_folders<MaskGray4>(images, masks, 3, {}), doctest::Contains("masks: not a directory"),
                       IoError);
  fs::create_directories(masks);
  CHECK_THROWS_WITH_AS(read_mask_folders<MaskGray4>(images, masks, 3, {}), doctest::Contains("a.png: no mask"),
                       IoError);
  test::write_png(masks / "a.png", 4, 4, 3, image_pattern(48, 0));
  CHECK_THROWS_WITH_AS(read_mask_folders<MaskGray4>(images, masks, 3, {}),
                       doctest::Contains("a.png: a mask must be an 8-bit gray or a palette PNG of class indices; this "
                                         "one is RGB with 8-bit samples"),
                       FormatError);
  auto m = mask_pattern(16, 3, 0);
  m[6] = 3;
  test::write_png(masks / "a.png", 4, 4, 1, m);
  CHECK_THROWS_WITH_AS(
      read_mask_folders<MaskGray4>(images, masks, 3, {}),
      doctest::Contains("a.png: pixel (1, 2) is 3, expected a class in [0, 3) or the ignore_index -100"), FormatError);
  test::write_png(masks / "a.png", 4, 3, 1, mask_pattern(12, 3, 0));
  CHECK_THROWS_WITH_AS(read_mask_folders<MaskGray4>(images, masks, 3, {}),
                       doctest::Contains("a.png: the mask is 3x4, its image"), ShapeError);
  CHECK_THROWS_WITH_AS(read_mask_folders<MaskGray8>(images, masks, 3, {}),
                       doctest::Contains("a.png: the image is 4x4 (H x W), the network's input is 1x8x8"), ShapeError);
}
