// Image transforms against PIL and torchvision on the same images
// (tests/reference/make_image_fixtures.py): Resize(shorter side), Image.resize(BILINEAR) up and
// down, CenterCrop (with padding), hflip, resized_crop and Resize + CenterCrop + ToTensor +
// Normalize, all bit for bit; RandomResizedCrop's box drawn as torchvision's get_params draws it.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/data/image_decode.hpp>
#include <cohort/data/image_transforms.hpp>

#include "support/fixture_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

struct TransformCase {
  std::string name, source, op;
  std::vector<double> args;
  std::size_t width = 0, height = 0, channels = 0;
  std::string file;
};

fs::path transforms_dir() { return fs::path(COHORT_FIXTURE_DIR) / "images" / "transforms"; }

std::vector<TransformCase> read_cases() {
  std::ifstream in(fs::path(COHORT_FIXTURE_DIR) / "images" / "transforms.txt");
  REQUIRE(in);
  std::vector<TransformCase> cases;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string part; std::getline(ss, part, '|');) f.push_back(part);
    REQUIRE(f.size() == 6);
    TransformCase c{f[0], f[1], f[2], {}, 0, 0, 0, f[5]};
    std::stringstream a(f[3]);
    for (double v; a >> v;) c.args.push_back(v);
    std::stringstream d(f[4]);
    d >> c.width >> c.height >> c.channels;
    cases.push_back(c);
  }
  return cases;
}

std::size_t channels_of(const std::string& source) { return source == "small_gray.png" ? 1 : 3; }

} // namespace

TEST_CASE("image transforms: PIL's bilinear resize, torchvision's Resize, CenterCrop, hflip and resized_crop, "
          "bit for bit") {
  std::set<std::string> ops;
  for (const auto& c : read_cases()) {
    if (c.op == "eval_pipeline") continue;
    CAPTURE(c.name);
    CAPTURE(c.source);
    const Image8 src = read_image(transforms_dir() / c.source, channels_of(c.source));
    Image8 out;
    const auto arg = [&](std::size_t i) { return std::size_t(c.args.at(i)); };
    if (c.op == "resize_shorter")
      out = resize_shorter_side(src, arg(0));
    else if (c.op == "resize")
      out = resize_bilinear(src, arg(0), arg(1));
    else if (c.op == "center_crop")
      out = center_crop(src, arg(0), arg(1));
    else if (c.op == "hflip")
      out = src, flip_horizontal(out);
    else if (c.op == "resized_crop")
      out = resize_bilinear(crop(src, std::ptrdiff_t(arg(0)), std::ptrdiff_t(arg(1)), arg(2), arg(3)), arg(5), arg(4));
    else
      FAIL("unknown op " << c.op);
    ops.insert(c.op);
    REQUIRE(out.width == c.width);
    REQUIRE(out.height == c.height);
    REQUIRE(out.channels == c.channels);
    const auto expected = read_file(transforms_dir() / c.file);
    REQUIRE(expected.size() == out.pixels.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) differing += expected[i] != out.pixels[i];
    CHECK(differing == 0);
  }
  CHECK(ops.size() == 5); // every op was compared
}

TEST_CASE("image transforms: Resize(20) + CenterCrop(16) + ToTensor + Normalize equal torchvision's floats") {
  for (const auto& c : read_cases()) {
    if (c.op != "eval_pipeline") continue;
    const Image8 src = read_image(transforms_dir() / c.source, 3);
    const Image8 img =
        center_crop(resize_shorter_side(src, std::size_t(c.args[0])), std::size_t(c.args[1]), std::size_t(c.args[1]));
    const auto norm = Normalization::per_channel({float(c.args[2]), float(c.args[3]), float(c.args[4])},
                                                 {float(c.args[5]), float(c.args[6]), float(c.args[7])});
    std::vector<float> x(3 * img.width * img.height);
    to_normalized_chw(img, norm, x);
    const auto raw = read_file(transforms_dir() / c.file);
    REQUIRE(raw.size() == x.size() * sizeof(float));
    std::vector<float> expected(x.size());
    std::memcpy(expected.data(), raw.data(), raw.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < x.size(); ++i) differing += expected[i] != x[i];
    CHECK(differing == 0);
  }
}

TEST_CASE("image transforms: RandomResizedCrop's box stays inside the image, follows the scale and ratio, and "
          "depends only on its random numbers") {
  std::size_t fallbacks = 0;
  for (std::uint64_t sample = 0; sample < 2000; ++sample) {
    const AugmentRandom rng(7, 1, sample, 254);
    const std::size_t W = 40 + sample % 17, H = 30 + sample % 23;
    const CropBox b = random_resized_crop_box(W, H, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, rng);
    CHECK(b.width >= 1);
    CHECK(b.height >= 1);
    CHECK(b.left + b.width <= W);
    CHECK(b.top + b.height <= H);
    CHECK(random_resized_crop_box(W, H, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, rng) == b);
    const double area = double(b.width * b.height) / double(W * H);
    const double ratio = double(b.width) / double(b.height);
    // Rounding w and h to integers moves area and ratio a little beyond the drawn values.
    CHECK(area <= 1.0);
    CHECK(area >= 0.05);
    if (!(ratio >= 0.6 && ratio <= 1.6)) ++fallbacks;
  }
  CHECK(fallbacks == 0);
  // An aspect ratio no crop can have: torchvision's fallback, the centred crop clamped to it.
  const CropBox wide = random_resized_crop_box(100, 10, {0.9, 1.0}, {1.0, 1.0}, AugmentRandom(1, 0, 0, 254));
  CHECK(wide == CropBox{0, 45, 10, 10});
}

TEST_CASE("image transforms: bad sizes are errors, not out-of-bounds reads") {
  Image8 img(4, 3, 1);
  CHECK_THROWS_WITH_AS(resize_bilinear(img, 0, 5), doctest::Contains("cannot resize 4x3 to 0x5"), ValueError);
  std::vector<float> x(11);
  CHECK_THROWS_WITH_AS(to_normalized_chw(img, {}, x),
                       doctest::Contains("a 1x3x4 image needs 12 floats, the destination has 11"), ShapeError);
  const Image8 far = crop(img, -10, 20, 2, 2); // entirely outside: zeros
  CHECK(far.pixels == std::vector<std::uint8_t>(4, 0));
}
