// Dense datasets (data/dense_dataset.hpp): MaskDataset and ImagePairDataset built from memory,
// bytes and IDX files; every bad value named before any step; batches gathered and jointly
// augmented as single samples are; the seam with a network.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <cohort/data/dense_dataset.hpp>
#include <cohort/models/unet.hpp>

#include "support/idx_bytes.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;

namespace {
using DenseSmall = Shape<1, 4, 3>; // H != W: a transposed pixel index would show
HostBuffer<float> dense_floats(std::size_t n, float scale = 0.5f) {
  HostBuffer<float> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = scale * float(i);
  return b;
}
HostBuffer<std::int32_t> dense_classes(std::size_t n, std::int32_t classes) {
  HostBuffer<std::int32_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::int32_t(i * 7 % std::size_t(classes));
  return b;
}
} // namespace

TEST_CASE("MaskDataset: images and masks from memory, with their shapes in the type") {
  static_assert(std::is_same_v<MaskDataset<Shape<3, 8, 6>>::mask_shape, Shape<8, 6>>);
  const MaskDataset<DenseSmall> d(dense_floats(5 * 12), dense_classes(5 * 12, 4), 4);
  CHECK(d.size() == 5);
  CHECK(d.num_classes() == 4);
  CHECK(d.ignore_index() == -100);
  CHECK(d.image(2)[3] == 0.5f * float(2 * 12 + 3));
  CHECK(d.mask(2)[3] == std::int32_t((2 * 12 + 3) * 7 % 4));
  const std::vector<float> x(2 * 12, 1.f);
  const std::vector<std::int32_t> m{0, 1, 2, -100, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto c = MaskDataset<DenseSmall>::copy_of(x, m, 3);
  CHECK(c.size() == 2);
  CHECK(c.mask(0)[3] == -100);
}

TEST_CASE("MaskDataset: a bad mask value or size is an error naming the sample and the pixel") {
  HostBuffer<std::int32_t> m = dense_classes(3 * 12, 4);
  m[12 + 5] = 4; // sample 1, pixel 5 = (row 1, column 2) of 4x3
  CHECK_THROWS_WITH_AS(MaskDataset<DenseSmall>(dense_floats(3 * 12), m, 4),
                       "MaskDataset: pixel (1, 2) of sample 1's mask is 4, expected a class in [0, 4) or the "
                       "ignore_index -100",
                       ValueError);
  m[12 + 5] = 255;
  CHECK_NOTHROW(MaskDataset<DenseSmall>(dense_floats(3 * 12), m, 4, 255)); // VOC's border label
  CHECK_THROWS_WITH_AS(MaskDataset<DenseSmall>(dense_floats(2 * 12), dense_classes(3 * 12, 4), 4),
                       "MaskDataset: 36 mask values are 3 masks of 4x3, which need 36 floats of images (1x4x3 "
                       "each), found 24",
                       ShapeError);
  CHECK_THROWS_AS(MaskDataset<DenseSmall>(dense_floats(12), dense_classes(13, 4), 4), ShapeError);
  CHECK_THROWS_AS(MaskDataset<DenseSmall>(dense_floats(12), dense_classes(12, 4), 0), ValueError);
}

TEST_CASE("MaskDataset: from bytes and from IDX files, normalised as ImageDataset normalises") {
  std::vector<std::uint8_t> pixels(2 * 12), masks(2 * 12);
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = std::uint8_t(i * 11);
    masks[i] = std::uint8_t(i % 3);
  }
  masks[4] = 255;
  const Normalization norm{0.3f, 0.2f};
  const auto d = MaskDataset<DenseSmall>::from_pixels(pixels, masks, 3, norm, 255);
  const auto table = norm.table();
  for (std::size_t i = 0; i < pixels.size(); ++i) CHECK(d.images()[i] == table[pixels[i]]);
  CHECK(d.mask(0)[4] == 255);
  CHECK(d.mask(1)[0] == 12 % 3);

  test::TempDir dir("cohort_test_dense_");
  const auto xi = test::write_idx(dir.path / "x", idx_images_magic, {2, 4, 3}, pixels);
  const auto mi = test::write_idx(dir.path / "m", idx_images_magic, {2, 4, 3}, masks);
  const auto loaded = MaskDataset<DenseSmall>::load(xi, mi, 3, norm, 255);
  CHECK(std::equal(loaded.images().begin(), loaded.images().end(), d.images().begin()));
  CHECK(std::equal(loaded.masks().begin(), loaded.masks().end(), d.masks().begin()));

  // The file is named: a mask value that is no class, a count or size that disagrees.
  masks[13] = 7;
  const auto bad = test::write_idx(dir.path / "bad", idx_images_magic, {2, 4, 3}, masks);
  CHECK_THROWS_WITH_AS(MaskDataset<DenseSmall>::load(xi, bad, 3, norm, 255),
                       doctest::Contains("bad: MaskDataset: pixel (0, 1) of sample 1's mask is 7"), FormatError);
  const auto one = test::write_idx(dir.path / "one", idx_images_magic, {1, 4, 3}, {masks.begin(), masks.begin() + 12});
  CHECK_THROWS_WITH_AS(MaskDataset<DenseSmall>::load(xi, one, 3, norm), doctest::Contains("has 2 images but"),
                       FormatError);
  const auto wide = test::write_idx(dir.path / "wide", idx_images_magic, {2, 3, 4}, masks);
  CHECK_THROWS_WITH_AS(MaskDataset<DenseSmall>::load(xi, wide, 3, norm),
                       doctest::Contains("MaskDataset (masks) expects (N, 4, 3) bytes for 1x4x3 samples, the file "
                                         "has 2x3x4"),
                       ShapeError);
}

TEST_CASE("MaskDataset: load_batch gathers samples and augments each as JointAugmentation::apply does") {
  const MaskDataset<Shape<2, 6, 6>> d(dense_floats(5 * 72, 0.01f), dense_classes(5 * 36, 5), 5);
  const std::vector<std::size_t> idx{3, 0, 3};
  std::vector<float> x(3 * 72);
  std::vector<std::int32_t> y(3 * 36);
  d.load_batch(idx, x, y);
  CHECK(std::equal(x.begin(), x.begin() + 72, d.image(3)));
  CHECK(std::equal(y.begin() + 36, y.begin() + 72, d.mask(0)));

  const JointAugmentation aug{JointRandomCrop(6, 2), JointRandomHorizontalFlip()};
  d.load_batch(idx, x, y, aug, {.seed = 9, .epoch = 2});
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::vector<float> xi(d.image(idx[i]), d.image(idx[i]) + 72);
    std::vector<std::int32_t> yi(d.mask(idx[i]), d.mask(idx[i]) + 36);
    aug.apply(xi, {2, 6, 6}, yi, 9, 2, idx[i]);
    CHECK(std::equal(xi.begin(), xi.end(), x.begin() + std::ptrdiff_t(i * 72)));
    CHECK(std::equal(yi.begin(), yi.end(), y.begin() + std::ptrdiff_t(i * 36)));
  }
  // The same index twice in a batch: the same pixels (the draw depends on the index, not the slot).
  CHECK(std::equal(x.begin(), x.begin() + 72, x.begin() + 144));

  const std::vector<std::size_t> outside{5};
  CHECK_THROWS_WITH_AS(d.load_batch(outside, std::span(x).first(72), std::span(y).first(36)),
                       "MaskDataset::load_batch: sample index 5 is outside the dataset's 5 samples", ValueError);
  CHECK_THROWS_AS(d.load_batch(idx, std::span(x).first(72), y), ShapeError);
}

TEST_CASE("ImagePairDataset: targets of another channel count, checked, gathered and augmented with the image") {
  using Pair = ImagePairDataset<Shape<1, 6, 6>, Shape<2, 6, 6>>;
  HostBuffer<float> t = dense_floats(4 * 72);
  const Pair d(dense_floats(4 * 36), t);
  CHECK(d.size() == 4);
  CHECK(d.target(1)[0] == 0.5f * 72.f);
  t[72 + 40] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(Pair(dense_floats(4 * 36), t),
                       "ImagePairDataset: value 40 of sample 1's target is nan, expected a finite number", ValueError);
  CHECK_THROWS_AS(Pair(dense_floats(3 * 36), dense_floats(4 * 72)), ShapeError);

  const std::vector<std::size_t> idx{2, 1};
  std::vector<float> x(2 * 36), y(2 * 72);
  const JointAugmentation aug{JointRandomCrop(6, 1), JointRandomHorizontalFlip()};
  d.load_batch(idx, x, y, aug, {.seed = 3, .epoch = 0});
  std::vector<float> xi(d.image(1), d.image(1) + 36), yi(d.target(1), d.target(1) + 72);
  aug.apply(xi, {1, 6, 6}, yi, 2, 3, 0, 1);
  CHECK(std::equal(yi.begin(), yi.end(), y.begin() + 72));
  CHECK(std::equal(xi.begin(), xi.end(), x.begin() + 36));

  std::vector<std::uint8_t> a(36, 51), b(72, 255);
  const auto p = Pair::from_pixels(a, b, Normalization{0.2f, 0.5f});
  CHECK(p.image(0)[0] == 0.f); // (51/255 - 0.2) / 0.5
  CHECK(p.target(0)[71] == 1.f);
}

TEST_CASE("check_dense_data: the class count against the network's scores per pixel") {
  using Net = models::UNet<Shape<1, 8, 8>, 3, 4, 1>;
  const MaskDataset<Shape<1, 8, 8>> ok(dense_floats(64), dense_classes(64, 3), 3);
  CHECK_NOTHROW(check_dense_data<Net>(ok, "train"));
  const MaskDataset<Shape<1, 8, 8>> many(dense_floats(64), dense_classes(64, 4), 4);
  CHECK_THROWS_WITH_AS(check_dense_data<Net>(many, "train"),
                       "check_dense_data: the train masks have 4 classes, the network scores 3 per pixel (3x8x8)",
                       ValueError);
}
