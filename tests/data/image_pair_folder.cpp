// Image-to-image folders (data/image_pair_folder.hpp): images and target images paired by name,
// each side decoded gray or RGB and normalised with its own statistics, and every bad pair named
// before any step.

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cohort/data/image_pair_folder.hpp>

#include "support/png_folder.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
std::vector<std::uint8_t> pair_pattern(std::size_t n, std::size_t salt) {
  std::vector<std::uint8_t> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::uint8_t(i * 11 + salt * 31);
  return x;
}
std::vector<std::uint8_t> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
} // namespace

TEST_CASE("read_image_pair_folders: gray images with RGB targets, paired by name, each side its own normalisation") {
  test::TempDir dir("cohort_test_pair_folder_");
  const std::vector<std::string> names{"b", "a"};
  for (std::size_t k = 0; k < names.size(); ++k) {
    test::write_png(dir.path / "x" / (names[k] + ".png"), 5, 4, 1, pair_pattern(20, k));
    test::write_png(dir.path / "y" / (names[k] + ".png"), 5, 4, 3, pair_pattern(60, k + 7));
  }
  test::write_png(dir.path / "y" / "unpaired.png", 5, 4, 3, pair_pattern(60, 0)); // not read
  const Normalization norm{0.4f, 0.2f}, target_norm{0.5f, 0.25f};
  const auto d =
      read_image_pair_folders<Shape<1, 4, 5>, Shape<3, 4, 5>>(dir.path / "x", dir.path / "y", norm, target_norm);
  REQUIRE(d.size() == 2);
  const auto table = norm.table(), target_table = target_norm.table();
  // Sample 0 is "a" (k = 1). The target is stored CHW: channel c of pixel p is byte 3p + c.
  const auto a = pair_pattern(20, 1), a_target = pair_pattern(60, 8);
  for (std::size_t p = 0; p < 20; ++p) {
    CHECK(d.image(0)[p] == table[a[p]]);
    for (std::size_t c = 0; c < 3; ++c) CHECK(d.target(0)[c * 20 + p] == target_table[a_target[3 * p + c]]);
  }
}

TEST_CASE("read_image_pair_folders: a JPEG target decodes as PIL's convert(\"L\") of it") {
  test::TempDir dir("cohort_test_pair_folder_");
  const fs::path decoded = fs::path(COHORT_FIXTURE_DIR) / "images" / "decode";
  test::write_png(dir.path / "x" / "photo.png", 37, 23, 1, pair_pattern(37 * 23, 3));
  fs::create_directories(dir.path / "y");
  fs::copy_file(decoded / "rgb420.jpg", dir.path / "y" / "photo.jpg");
  const auto d = read_image_pair_folders<Shape<1, 23, 37>>(dir.path / "x", dir.path / "y", {});
  REQUIRE(d.size() == 1);
  const auto expected = file_bytes(decoded / "rgb420.jpg.L"); // PIL's bytes (tests/reference)
  REQUIRE(expected.size() == 23 * 37);
  for (std::size_t p = 0; p < expected.size(); ++p) CHECK(d.target(0)[p] == float(expected[p]) / 255.f);
}

TEST_CASE("read_image_pair_folders: a missing, doubled, mis-sized or broken target is an error naming the file") {
  test::TempDir dir("cohort_test_pair_folder_");
  const fs::path x = dir.path / "x", y = dir.path / "y";
  using S = Shape<1, 4, 4>;
  test::write_png(x / "a.png", 4, 4, 1, pair_pattern(16, 0));
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}),
                       doctest::Contains("y: not a directory (read_image_pair_folders needs an images folder and a "
                                         "targets folder)"),
                       IoError);
  fs::create_directories(y);
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}), doctest::Contains("a.png: no target"), IoError);
  test::write_png(y / "a.png", 4, 3, 1, pair_pattern(12, 0));
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}),
                       doctest::Contains("a.png: the target is 3x4 (H x W), expected 1x4x4"), ShapeError);
  test::write_png(y / "a.png", 4, 4, 1, pair_pattern(16, 0));
  CHECK(read_image_pair_folders<S>(x, y, {}).size() == 1);
  std::ofstream(y / "a.jpg") << "not a jpeg";
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}), doctest::Contains("two targets of its name"), IoError);
  fs::remove(y / "a.png");
  CHECK_THROWS_AS(read_image_pair_folders<S>(x, y, {}), FormatError);
  fs::remove(y / "a.jpg");
  test::write_png(x / "b.png", 4, 5, 1, pair_pattern(20, 0));
  test::write_png(y / "a.png", 4, 4, 1, pair_pattern(16, 0));
  test::write_png(y / "b.png", 4, 4, 1, pair_pattern(16, 0));
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}),
                       doctest::Contains("b.png: the image is 5x4 (H x W), expected 1x4x4"), ShapeError);
}

TEST_CASE("read_image_pair_folders: a partner's extension matches in any case, its stem exactly") {
  test::TempDir dir("cohort_test_pair_folder_");
  const fs::path x = dir.path / "x", y = dir.path / "y";
  using S = Shape<1, 4, 4>;
  test::write_png(x / "a.png", 4, 4, 1, pair_pattern(16, 0));
  test::write_png(x / "B.PNG", 4, 4, 1, pair_pattern(16, 1));
  test::write_png(y / "a.PNG", 4, 4, 1, pair_pattern(16, 2));
  test::write_png(y / "B.Png", 4, 4, 1, pair_pattern(16, 3));
  test::write_png(y / "b.png", 4, 4, 1, pair_pattern(16, 4)); // another stem: never B.PNG's partner
  const auto d = read_image_pair_folders<S>(x, y, {});
  REQUIRE(d.size() == 2); // "B.PNG" sorts before "a.png", as Python's sorted() puts them
  const auto table = Normalization{}.table();
  const auto b_target = pair_pattern(16, 3), a_target = pair_pattern(16, 2);
  for (std::size_t p = 0; p < 16; ++p) {
    CHECK(d.target(0)[p] == table[b_target[p]]);
    CHECK(d.target(1)[p] == table[a_target[p]]);
  }
  std::ofstream(y / "a.JPG") << "not a jpeg";
  const std::string two = "two targets of its name, " + (y / "a.JPG").string() + " and " + (y / "a.PNG").string();
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}), doctest::Contains(two.c_str()), IoError);
  fs::remove(y / "a.JPG");
  fs::remove(y / "a.PNG");
  const std::string none =
      "a.png: no target " + (y / "a").string() + " with extension .png | .jpg | .jpeg (in any case)";
  CHECK_THROWS_WITH_AS(read_image_pair_folders<S>(x, y, {}), doctest::Contains(none.c_str()), IoError);
}
