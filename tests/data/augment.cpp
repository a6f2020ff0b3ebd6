// Augmentation (data/augment.hpp): RandomCrop and RandomHorizontalFlip against by-hand references
// (torchvision's order: pad the raw image with 0, then ToTensor + Normalize), randomness keyed
// by (seed, epoch, sample, position) only, distributions, transforms of one's own, the parser.

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

#include <cohort/data/augment.hpp>

using namespace cohort;

namespace {

/// A raw CHW image whose every byte is distinct per (c, y, x) (values 1..250: none is 0, so a
/// padded pixel cannot pass for an image pixel).
std::vector<std::uint8_t> raw_image(ImageDims s, unsigned salt = 0) {
  std::vector<std::uint8_t> v(s.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::uint8_t(1 + (i * 37 + salt * 11) % 250);
  return v;
}

std::vector<float> normalise(const std::vector<std::uint8_t>& raw, ImageDims s, const Normalization& n) {
  std::vector<float> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = n.normalized(raw[i], i / (s.height * s.width));
  return out;
}

/// torchvision's RandomCrop(size, padding) at window (top, left) written out by hand: pad the raw
/// image with zeros, cut the window, then ToTensor + Normalize.
std::vector<float> crop_reference(const std::vector<std::uint8_t>& raw, ImageDims s, std::size_t padding,
                                  std::size_t top, std::size_t left, const Normalization& n) {
  const std::size_t ph = s.height + 2 * padding, pw = s.width + 2 * padding;
  std::vector<std::uint8_t> padded(s.channels * ph * pw, 0);
  for (std::size_t c = 0; c < s.channels; ++c)
    for (std::size_t y = 0; y < s.height; ++y)
      for (std::size_t x = 0; x < s.width; ++x)
        padded[(c * ph + y + padding) * pw + x + padding] = raw[(c * s.height + y) * s.width + x];
  std::vector<std::uint8_t> cut(s.size());
  for (std::size_t c = 0; c < s.channels; ++c)
    for (std::size_t y = 0; y < s.height; ++y)
      for (std::size_t x = 0; x < s.width; ++x)
        cut[(c * s.height + y) * s.width + x] = padded[(c * ph + top + y) * pw + left + x];
  return normalise(cut, s, n);
}

std::vector<float> flip_reference(std::vector<float> v, ImageDims s) {
  for (std::size_t r = 0; r < s.channels * s.height; ++r)
    std::reverse(v.begin() + std::ptrdiff_t(r * s.width), v.begin() + std::ptrdiff_t((r + 1) * s.width));
  return v;
}

const Normalization rgb = Normalization::per_channel({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});

} // namespace

TEST_CASE("RandomCrop: every window is torchvision's pad-with-raw-0-then-normalise crop, pixel for pixel") {
  const ImageDims s{3, 5, 5};
  for (const std::size_t padding : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{6}}) {
    CAPTURE(padding);
    const RandomCrop crop(5, padding, rgb);
    const std::size_t span = 2 * padding + 1;
    std::set<std::pair<std::size_t, std::size_t>> windows;
    for (std::uint64_t sample = 0; sample < 20 * span * span; ++sample) {
      const auto raw = raw_image(s, unsigned(sample));
      auto image = normalise(raw, s, rgb);
      const AugmentRandom rng(7, 3, sample, 0);
      crop(image, s, rng);
      // The window torchvision would cut: top, then left, each uniform over the padded range.
      const std::size_t top = rng.below(0, std::uint32_t(span)), left = rng.below(1, std::uint32_t(span));
      windows.insert({top, left});
      CHECK(image == crop_reference(raw, s, padding, top, left, rgb));
    }
    CHECK(windows.size() == span * span); // every window was seen (the extreme ones included)
  }
}

TEST_CASE("RandomCrop: the padding is the normalised raw 0 of each channel, (0 - mean_c) / std_c, not 0") {
  const ImageDims s{3, 4, 4};
  const RandomCrop crop(4, 4, rgb);
  std::vector<float> image(s.size(), 100.f);
  // padding 4 on a 4x4 image: some window is all padding; find one and check every channel.
  for (std::uint64_t sample = 0;; ++sample) {
    REQUIRE(sample < 10000);
    const AugmentRandom rng(1, 0, sample, 0);
    const std::uint32_t top = rng.below(0, 9), left = rng.below(1, 9);
    if (!(top == 0 && left == 0)) continue;
    crop(image, s, rng);
    break;
  }
  for (std::size_t c = 0; c < 3; ++c) {
    const float pad = (0.f - rgb.channel_mean[c]) / rgb.channel_std[c];
    CHECK(pad != 0.f);
    for (std::size_t i = 0; i < 16; ++i) CHECK(image[c * 16 + i] == pad);
  }
  CHECK(Normalization{}.normalized(0, 0) == 0.f); // the default normalisation pads with 0
}

TEST_CASE("RandomHorizontalFlip: mirrors every row exactly when uniform(0) < p") {
  const ImageDims s{3, 4, 6};
  const RandomHorizontalFlip flip; // p = 0.5
  std::size_t flipped = 0;
  for (std::uint64_t sample = 0; sample < 200; ++sample) {
    const auto original = normalise(raw_image(s, unsigned(sample)), s, rgb);
    auto image = original;
    const AugmentRandom rng(9, 1, sample, 0);
    flip(image, s, rng);
    const bool should = rng.uniform(0) < 0.5f;
    CHECK(image == (should ? flip_reference(original, s) : original));
    flipped += should;
  }
  CHECK(flipped > 50);
  CHECK(flipped < 150);
  auto image = normalise(raw_image(s), s, rgb);
  const auto original = image;
  RandomHorizontalFlip(1.f)(image, s, AugmentRandom(0, 0, 0, 0));
  CHECK(image == flip_reference(original, s));
  RandomHorizontalFlip(0.f)(image, s, AugmentRandom(0, 0, 0, 0));
  CHECK(image == flip_reference(original, s)); // p = 0: untouched
}

TEST_CASE("Augmentation: the output depends only on (seed, epoch, sample index), never on batching or order") {
  const ImageDims s{3, 8, 8};
  const Augmentation aug{RandomCrop(8, 2, rgb), RandomHorizontalFlip()};
  const std::vector<std::size_t> samples{5, 9, 2, 7, 13, 1};
  auto batch_of = [&](const std::vector<std::size_t>& idx) {
    std::vector<float> b;
    for (const auto i : idx) {
      const auto img = normalise(raw_image(s, unsigned(i)), s, rgb);
      b.insert(b.end(), img.begin(), img.end());
    }
    return b;
  };
  auto one = [&](std::size_t sample, std::uint64_t seed, std::uint64_t epoch) {
    auto img = normalise(raw_image(s, unsigned(sample)), s, rgb);
    aug.apply(img, s, seed, epoch, sample);
    return img;
  };
  // A whole batch equals each sample on its own, and a batch in another order (another
  // replica's or rank's share, another thread's) holds the same images.
  auto batch = batch_of(samples);
  aug.apply_batch(batch, s, samples, 4, 2);
  std::vector<std::size_t> reversed(samples.rbegin(), samples.rend());
  auto other = batch_of(reversed);
  aug.apply_batch(other, s, reversed, 4, 2);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto expect = one(samples[i], 4, 2);
    CHECK(std::equal(expect.begin(), expect.end(), batch.begin() + std::ptrdiff_t(i * s.size())));
    const std::size_t j = samples.size() - 1 - i;
    CHECK(std::equal(expect.begin(), expect.end(), other.begin() + std::ptrdiff_t(j * s.size())));
  }
  // Same key, same image; another epoch, seed or sample: another image (for most samples: a
  // 1-in-50 coincidence of window and flip is allowed).
  std::size_t epoch_differs = 0, seed_differs = 0;
  for (std::size_t i = 0; i < 50; ++i) {
    CHECK(one(i, 4, 2) == one(i, 4, 2));
    epoch_differs += one(i, 4, 2) != one(i, 4, 3);
    seed_differs += one(i, 4, 2) != one(i, 5, 2);
  }
  CHECK(epoch_differs >= 45);
  CHECK(seed_differs >= 45);
}

TEST_CASE("Augmentation: flip rate near p and crop windows uniform over many samples") {
  const ImageDims s{1, 4, 4};
  for (const float p : {0.5f, 0.2f}) {
    const RandomHorizontalFlip flip(p);
    std::size_t count = 0;
    const std::size_t n = 20000;
    for (std::uint64_t sample = 0; sample < n; ++sample) {
      std::vector<float> img{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      flip(img, s, AugmentRandom(3, 0, sample, 1));
      count += img[0] == 3.f;
    }
    // Binomial(20000, p): 5 standard deviations are at most 0.018 of n.
    CAPTURE(count);
    CHECK(std::abs(double(count) / double(n) - double(p)) < 0.018);
  }
  // 9 x 9 windows (padding 4): each within 30% of 20000 / 81.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> windows;
  for (std::uint64_t sample = 0; sample < 20000; ++sample) {
    const AugmentRandom rng(2, 1, sample, 0);
    ++windows[{rng.below(0, 9), rng.below(1, 9)}];
  }
  CHECK(windows.size() == 81);
  for (const auto& [w, c] : windows) {
    CAPTURE(w.first);
    CAPTURE(w.second);
    CHECK(double(c) > 0.7 * 20000 / 81);
    CHECK(double(c) < 1.3 * 20000 / 81);
  }
}

TEST_CASE("Augmentation: a transform of one's own gets its own stream, and adding one changes nothing before it") {
  const ImageDims s{1, 4, 4};
  const auto noise = [](std::span<float> image, ImageDims, const AugmentRandom& rng) {
    for (std::size_t i = 0; i < image.size(); ++i) image[i] += rng.uniform(std::uint32_t(i));
  };
  static_assert(ImageTransform<decltype(noise)>);
  static_assert(!ImageTransform<int>);
  Augmentation aug{RandomHorizontalFlip(1.f)};
  aug.add(noise, "noise");
  CHECK(aug.size() == 2);
  CHECK(aug.names() == "RandomHorizontalFlip(p=1), noise");
  std::vector<float> image(16, 0.f);
  aug.apply(image, s, 21, 4, 8);
  const AugmentRandom second(21, 4, 8, /*position=*/1);
  for (std::size_t i = 0; i < 16; ++i) CHECK(image[i] == second.uniform(std::uint32_t(i)));

  // The crop and the flip do the same with a transform appended.
  const Augmentation a{RandomCrop(4, 1), RandomHorizontalFlip()};
  Augmentation b{RandomCrop(4, 1), RandomHorizontalFlip()};
  b.add(noise);
  b.add([](std::span<float> image, ImageDims, const AugmentRandom& rng) {
    for (std::size_t i = 0; i < image.size(); ++i) image[i] -= rng.uniform(std::uint32_t(i));
  });
  const AugmentRandom n2(21, 4, 3, 2), n3(21, 4, 3, 3);
  std::vector<float> x(16), y(16);
  for (std::size_t i = 0; i < 16; ++i) x[i] = y[i] = float(i);
  a.apply(x, s, 21, 4, 3);
  b.apply(y, s, 21, 4, 3);
  for (std::size_t i = 0; i < 16; ++i)
    CHECK(y[i] == x[i] + n2.uniform(std::uint32_t(i)) - n3.uniform(std::uint32_t(i)));
}

TEST_CASE("Augmentation: bad settings and shapes are errors naming the setting") {
  CHECK_THROWS_WITH_AS(RandomHorizontalFlip(1.5f), doctest::Contains("p must be in [0, 1], got 1.5"), ValueError);
  CHECK_THROWS_AS(RandomCrop(0, 4), ValueError);
  CHECK_THROWS_WITH_AS(RandomCrop(4, 1, Normalization{0.f, 0.f}), doctest::Contains("std must be positive"),
                       ValueError);
  std::vector<float> image(3 * 28 * 28);
  CHECK_THROWS_WITH_AS(RandomCrop(32, 4)(image, {3, 28, 28}, AugmentRandom(0, 0, 0, 0)),
                       doctest::Contains("the crop is 32x32 but the images are 28x28"), ShapeError);
  CHECK_THROWS_WITH_AS(
      RandomCrop(28, 4, rgb)(std::span<float>(image.data(), 784), {1, 28, 28}, AugmentRandom(0, 0, 0, 0)),
      doctest::Contains("the normalisation has 3 channel(s), the images have 1"), ShapeError);
  const Augmentation aug{RandomHorizontalFlip()};
  CHECK_THROWS_WITH_AS(aug.apply(image, {3, 28, 27}, 0, 0, 0), doctest::Contains("has 2268 values, got 2352"),
                       ShapeError);
}

TEST_CASE("parse_augmentation: crop=P and flip[=P], comma-separated, anything else is named") {
  CHECK(parse_augmentation("", 32).empty());
  CHECK(parse_augmentation("crop=4,flip", 32).names() == "RandomCrop(32, padding=4), RandomHorizontalFlip(p=0.5)");
  CHECK(parse_augmentation("flip=0.25", 28).names() == "RandomHorizontalFlip(p=0.25)");
  CHECK_THROWS_WITH_AS(parse_augmentation("crop=4,rotate", 32), doctest::Contains("cannot read \"rotate\""),
                       ValueError);
  CHECK_THROWS_AS(parse_augmentation("crop=x", 32), ValueError);
  CHECK_THROWS_AS(parse_augmentation("crop", 32), ValueError);
  CHECK_THROWS_AS(parse_augmentation("flip=2", 32), ValueError);
}
