// Joint augmentation (data/joint_augment.hpp): the image is transformed exactly as
// data/augment.hpp's transforms of the same name transform it alone, and its mask or target
// image moves with it pixel for pixel; padding, reproducibility and errors.

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include <cohort/data/joint_augment.hpp>

using namespace cohort;

namespace {
constexpr std::size_t joint_h = 6, joint_w = 6, joint_plane = joint_h * joint_w;

// Channel c of pixel p holds 1000 c + p, the mask holds p: after any crop or flip, a mask value
// says which source pixel the image's value must be.
std::vector<float> position_image(std::size_t channels) {
  std::vector<float> x(channels * joint_plane);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(1000 * (i / joint_plane) + i % joint_plane);
  return x;
}
std::vector<std::int32_t> position_mask() {
  std::vector<std::int32_t> m(joint_plane);
  for (std::size_t p = 0; p < joint_plane; ++p) m[p] = std::int32_t(p);
  return m;
}
} // namespace

TEST_CASE("JointAugmentation: the image is transformed exactly as Augmentation transforms it alone") {
  const Normalization norm = Normalization::per_channel({0.2f, 0.5f}, {0.3f, 0.25f});
  const JointAugmentation joint{JointRandomCrop(joint_h, 2, norm), JointRandomHorizontalFlip()};
  const Augmentation alone{RandomCrop(joint_h, 2, norm), RandomHorizontalFlip()};
  CHECK(joint.names() == alone.names());
  std::size_t moved = 0;
  for (std::uint64_t sample = 0; sample < 64; ++sample) {
    std::vector<float> a = position_image(2), b = a;
    std::vector<std::int32_t> mask = position_mask();
    joint.apply(a, {2, joint_h, joint_w}, mask, 7, 3, sample);
    alone.apply(b, {2, joint_h, joint_w}, 7, 3, sample);
    CHECK(a == b);
    moved += a != position_image(2);
  }
  CHECK(moved > 48); // most samples were cropped or flipped
}

TEST_CASE("JointAugmentation: the mask moves with the image pixel for pixel, and its padding is ignore_index") {
  const JointAugmentation aug{JointRandomCrop(joint_h, 3), JointRandomHorizontalFlip()};
  std::size_t padded = 0;
  for (std::uint64_t sample = 0; sample < 64; ++sample) {
    std::vector<float> x = position_image(2);
    std::vector<std::int32_t> mask = position_mask();
    aug.apply(x, {2, joint_h, joint_w}, mask, 1, 0, sample);
    for (std::size_t p = 0; p < joint_plane; ++p) {
      if (mask[p] == -100) { // from outside the image: the image there is padding (raw 0, Normalization{}: 0)
        ++padded;
        CHECK(x[p] == 0.f);
        CHECK(x[joint_plane + p] == 0.f);
      } else {
        CHECK(x[p] == float(mask[p]));
        CHECK(x[joint_plane + p] == float(1000 + mask[p]));
      }
    }
  }
  CHECK(padded > 0);
}

TEST_CASE("JointAugmentation: a target image moves with the image, and its padding is target_fill") {
  const JointAugmentation aug{JointRandomCrop(joint_h, 2, {}, -100, -1.f), JointRandomHorizontalFlip()};
  for (std::uint64_t sample = 0; sample < 32; ++sample) {
    std::vector<float> x = position_image(1), t = position_image(3);
    aug.apply(x, {1, joint_h, joint_w}, t, 3, 5, 1, sample);
    for (std::size_t p = 0; p < joint_plane; ++p)
      for (std::size_t c = 0; c < 3; ++c) {
        const float v = t[c * joint_plane + p];
        if (v == -1.f)
          CHECK(x[p] == 0.f);
        else
          CHECK(v == float(1000 * c) + x[p]);
      }
  }
}

TEST_CASE("JointAugmentation: reproducible from (seed, epoch, sample), with custom mask padding and flip p") {
  const JointAugmentation aug{JointRandomCrop(joint_h, 2, {}, 255)};
  auto run = [&](std::uint64_t seed, std::uint64_t epoch, std::uint64_t sample) {
    std::vector<float> x = position_image(1);
    std::vector<std::int32_t> m = position_mask();
    aug.apply(x, {1, joint_h, joint_w}, m, seed, epoch, sample);
    return m;
  };
  CHECK(run(4, 2, 9) == run(4, 2, 9));
  std::size_t differ = 0, filled = 0;
  for (std::uint64_t s = 0; s < 32; ++s) {
    differ += run(4, 2, s) != run(4, 3, s);
    for (std::int32_t v : run(4, 2, s)) filled += v == 255;
  }
  CHECK(differ > 16);
  CHECK(filled > 0);

  std::vector<float> x = position_image(1);
  std::vector<std::int32_t> m = position_mask();
  JointAugmentation{JointRandomHorizontalFlip(1.f)}.apply(x, {1, joint_h, joint_w}, m, 0, 0, 0);
  CHECK(m[0] == std::int32_t(joint_w - 1));
  CHECK(x[0] == float(joint_w - 1));
  m = position_mask();
  JointAugmentation{JointRandomHorizontalFlip(0.f)}.apply(x, {1, joint_h, joint_w}, m, 0, 0, 0);
  CHECK(m == position_mask());
}

TEST_CASE("JointAugmentation: wrong sizes and arguments are errors that say what was expected") {
  const JointAugmentation aug{JointRandomHorizontalFlip()};
  std::vector<float> x(joint_plane);
  std::vector<std::int32_t> small(joint_plane - 1);
  CHECK_THROWS_WITH_AS(aug.apply(x, {1, joint_h, joint_w}, small, 0, 0, 0),
                       "JointAugmentation: a mask of 6x6 has 36 values, got 35", ShapeError);
  std::vector<float> t(joint_plane);
  CHECK_THROWS_WITH_AS(aug.apply(x, {1, joint_h, joint_w}, t, 2, 0, 0, 0),
                       "JointAugmentation: a target image of 2x6x6 has 72 values (at least one channel), got 36",
                       ShapeError);
  std::vector<std::int32_t> m(joint_plane);
  CHECK_THROWS_WITH_AS(JointAugmentation{JointRandomCrop(8, 1)}.apply(x, {1, joint_h, joint_w}, m, 0, 0, 0),
                       "RandomCrop: the crop is 8x8 but the images are 6x6 (the network's input); crop to the "
                       "input size",
                       ShapeError);
  CHECK_THROWS_AS(JointRandomHorizontalFlip(1.5f), ValueError);
  CHECK_THROWS_AS(JointRandomCrop(0, 1), ValueError);
}
