// ImageView: a dataset over the caller's memory (no copy, its extent checked, labels checked
// naming the sample); ImageDataset::copy_of and from_pixels from spans (a copy the dataset owns).

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <cohort/data/dataset.hpp>
#include <cohort/data/image_view.hpp>

using namespace cohort;
using Image = Shape<1, 4, 4>;

TEST_CASE("ImageView: reads the caller's memory in place") {
  std::vector<float> x(3 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  const std::vector<std::int32_t> y{2, 0, 1};
  const ImageView<Image> v(x, y, 3);
  CHECK(v.size() == 3);
  CHECK(v.num_classes() == 3);
  CHECK(v.image(0) == x.data());
  CHECK(v.image(2) == x.data() + 32);
  CHECK(v.label(1) == 0);
  x[40] = -1; // the view sees later changes: it is the caller's memory
  CHECK(v.image(2)[8] == -1);
}

TEST_CASE("ImageView: images that do not fill the labels' samples are a ShapeError naming both sizes") {
  const std::vector<float> x(3 * 16 - 1);
  const std::vector<std::int32_t> y{0, 1, 2};
  CHECK_THROWS_WITH_AS(ImageView<Image>(x, y, 3),
                       doctest::Contains("ImageView: 3 labels need 48 floats of images (1x4x4 each), found 47"),
                       ShapeError);
}

TEST_CASE("ImageView: a label outside the classes is a ValueError naming the sample") {
  const std::vector<float> x(4 * 16);
  const std::vector<std::int32_t> y{0, 1, 3, 2};
  CHECK_THROWS_WITH_AS(ImageView<Image>(x, y, 3),
                       doctest::Contains("label of sample 2 is 3, expected a class in [0, 3)"), ValueError);
  const std::vector<std::int32_t> negative{0, -1, 1, 2};
  CHECK_THROWS_WITH_AS(ImageView<Image>(x, negative, 3), doctest::Contains("label of sample 1 is -1"), ValueError);
  CHECK_THROWS_AS(ImageView<Image>(x, y, 0), ValueError);
}

TEST_CASE("ImageDataset::copy_of and from_pixels(spans): a copy the dataset owns") {
  std::vector<float> x(2 * 16, 0.5f);
  const std::vector<std::int32_t> y{1, 0};
  const auto d = ImageDataset<Image>::copy_of(x, y, 2);
  CHECK(d.image(0) != x.data());
  x[0] = 7; // the copy does not change
  CHECK(d.image(0)[0] == 0.5f);
  CHECK(d.label(0) == 1);
  CHECK_THROWS_AS(ImageDataset<Image>::copy_of(std::span<const float>(x).first(31), y, 2), ShapeError);

  const std::vector<std::uint8_t> pixels(2 * 16, 255);
  const auto p =
      ImageDataset<Image>::from_pixels(pixels, std::span<const std::int32_t>(y), 2, Normalization{0.5f, 0.5f});
  CHECK(p.image(1)[15] == doctest::Approx(1.0f)); // (255 / 255 - 0.5) / 0.5
  CHECK(p.label(1) == 0);
}
