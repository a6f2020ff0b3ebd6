// The CIFAR-10/100 binary reader (data/cifar.hpp) on files the tests write in the real format:
// record layout (label bytes, then R, G, B planes), every file of a split in order, fine and
// coarse labels, per-channel normalisation, and a typed error for every bad input. A small
// colour network trains on such a file with augmentation.

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/data/cifar.hpp>

#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::TempDir;

/// The pixel byte of record `r` (counted over the whole split) at channel c, row y, column x.
std::uint8_t pixel(std::size_t r, std::size_t c, std::size_t y, std::size_t x) {
  return std::uint8_t((r * 7 + c * 85 + y * 3 + x * 5) % 256);
}

/// CIFAR records for `labels` (1 byte each: CIFAR-10; 2 bytes, coarse then fine: CIFAR-100),
/// records numbered from `first`.
std::vector<char> records(const std::vector<std::vector<std::uint8_t>>& labels, std::size_t first = 0) {
  std::vector<char> out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    for (const auto l : labels[i]) out.push_back(char(l));
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 32; ++y)
        for (std::size_t x = 0; x < 32; ++x) out.push_back(char(pixel(first + i, c, y, x)));
  }
  return out;
}

void write(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

/// A CIFAR-10 directory: batches 1..5 with 3, 2, 1, 2, 2 records (labels r % 10), a test batch
/// of 4, and the class names.
void write_cifar10(const fs::path& dir) {
  const std::size_t counts[] = {3, 2, 1, 2, 2};
  std::size_t r = 0;
  for (int b = 0; b < 5; ++b) {
    std::vector<std::vector<std::uint8_t>> labels;
    for (std::size_t i = 0; i < counts[b]; ++i) labels.push_back({std::uint8_t((r + i) % 10)});
    write(dir / ("data_batch_" + std::to_string(b + 1) + ".bin"), records(labels, r));
    r += counts[b];
  }
  write(dir / "test_batch.bin", records({{9}, {0}, {4}, {4}}));
  std::ofstream(dir / "batches.meta.txt") << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
}

} // namespace

TEST_CASE("CIFAR-10: every batch file in order, labels, and R, G, B planes as CHW, normalised per channel") {
  TempDir dir("cohort_cifar_");
  write_cifar10(dir.path);
  const auto train = read_cifar(dir.path, CifarVariant::cifar10, Split::train);
  REQUIRE(train.size() == 10);
  CHECK(train.num_classes == 10);
  for (std::size_t r = 0; r < 10; ++r) CHECK(train.labels[r] == std::int32_t(r % 10));
  for (std::size_t r = 0; r < 10; ++r)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 32; y += 7)
        for (std::size_t x = 0; x < 32; x += 5)
          CHECK(train.pixels[((r * 3 + c) * 32 + y) * 32 + x] == pixel(r, c, y, x));
  const Normalization norm = train.statistics();
  REQUIRE(norm.channels() == 3);
  const auto set = train.dataset(norm);
  static_assert(std::is_same_v<decltype(set), const ImageDataset<Shape<3, 32, 32>>>);
  REQUIRE(set.size() == 10);
  for (std::size_t r = 0; r < 10; r += 3)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 32; y += 9)
        for (std::size_t x = 0; x < 32; x += 4)
          CHECK(set.image(r)[(c * 32 + y) * 32 + x] ==
                (float(pixel(r, c, y, x)) / 255.f - norm.channel_mean[c]) / norm.channel_std[c]);
  const auto test = load_cifar(dir.path, CifarVariant::cifar10, Split::test, norm);
  REQUIRE(test.size() == 4);
  CHECK(test.label(0) == 9);
  CHECK(test.label(3) == 4);
  const auto names = read_cifar_class_names(dir.path, CifarVariant::cifar10);
  REQUIRE(names.size() == 10);
  CHECK(names[9] == "truck");
}

TEST_CASE("CIFAR-100: two label bytes, coarse then fine, and the dataset uses the one asked for") {
  TempDir dir("cohort_cifar_");
  write(dir.path / "train.bin", records({{19, 99}, {0, 42}, {7, 3}}));
  write(dir.path / "test.bin", records({{1, 2}}));
  const auto fine = read_cifar(dir.path, CifarVariant::cifar100, Split::train);
  const auto coarse = read_cifar(dir.path, CifarVariant::cifar100, Split::train, CifarLabels::coarse);
  CHECK(fine.num_classes == 100);
  CHECK(coarse.num_classes == 20);
  CHECK(std::vector<std::int32_t>(fine.labels.begin(), fine.labels.end()) == std::vector<std::int32_t>{99, 42, 3});
  CHECK(std::vector<std::int32_t>(coarse.labels.begin(), coarse.labels.end()) == std::vector<std::int32_t>{19, 0, 7});
  CHECK(fine.pixels == coarse.pixels);
  CHECK(fine.pixels[3072 + 5] == pixel(1, 0, 0, 5)); // the second record's pixels follow its 2 label bytes
  const auto test = load_cifar(dir.path, CifarVariant::cifar100, Split::test, fine.statistics(), CifarLabels::coarse);
  CHECK(test.num_classes() == 20);
  CHECK(test.label(0) == 1);
}

TEST_CASE("Normalization: per channel, of CHW bytes, equal to torchvision's ToTensor + Normalize bit for bit") {
  // Two 1x2 images of 3 channels, statistics by hand.
  const std::vector<std::uint8_t> bytes{0,   255, /**/ 10, 10, /**/ 0, 0, // image 0: R, G, B planes of 2 pixels
                                        255, 0,   /**/ 30, 30, /**/ 0, 0};
  const auto n = Normalization::of(bytes, 3, 2);
  REQUIRE(n.channels() == 3);
  CHECK(n.channel_mean[0] == 0.5f);
  CHECK(n.channel_std[0] == 0.5f);
  CHECK(n.channel_mean[1] == float(20.0 / 255.0));
  CHECK(n.channel_std[1] == float(10.0 / 255.0));
  CHECK(n.channel_mean[2] == 0.f);
  CHECK(n.channel_std[2] == 1.f); // a constant channel only shifts
  // Each channel's statistics are the scalar form's over that channel's bytes.
  const std::vector<std::uint8_t> r{0, 255, 255, 0};
  CHECK(Normalization::of(r).mean == n.channel_mean[0]);
  CHECK_THROWS_WITH_AS(Normalization::of(bytes, 3, 3),
                       doctest::Contains("12 bytes are not whole images of 3 channel(s)"), ShapeError);
  // torch: img.to(float32).div(255).sub(mean).div(std), mean/std as float32 tensors (values
  // computed with torch 2.x, bit patterns).
  const auto rgb = Normalization::per_channel({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
  const std::uint8_t img[3][4] = {{0, 1, 128, 255}, {0, 7, 200, 255}, {0, 33, 64, 255}};
  const std::uint32_t torch_bits[3][4] = {{0xbffea713, 0xbffc9ed3, 0x3d2f2140, 0x4003c873},
                                          {0xbffd7a10, 0xbfef0bf6, 0x3f9ecfb4, 0x40081864},
                                          {0xbfda7891, 0xbf9b2675, 0xbf3f558c, 0x400769b1}};
  HostBuffer<std::int32_t> label(1);
  label[0] = 0;
  const std::vector<std::uint8_t> chw(&img[0][0], &img[0][0] + 12); // the planes, one after another
  const auto d = ImageDataset<Shape<3, 2, 2>>::from_pixels(chw, label, 1, rgb);
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(std::bit_cast<std::uint32_t>(d.image(0)[c * 4 + i]) == torch_bits[c][i]);
      CHECK(rgb.table(c)[img[c][i]] == d.image(0)[c * 4 + i]);
    }
  // The scalar form still works for any channel count, and errors name the channel.
  const auto gray = ImageDataset<Shape<3, 2, 2>>::from_pixels(chw, label, 1, Normalization{0.5f, 0.25f});
  CHECK(gray.image(0)[5] == (7.f / 255.f - 0.5f) / 0.25f);
  CHECK_THROWS_WITH_AS(rgb.table(3), doctest::Contains("no statistics for channel 3"), ValueError);
  CHECK_THROWS_WITH_AS(Normalization::per_channel({0.5f, 0.5f, 0.5f}, {1.f, 0.f, 1.f}).table(1),
                       doctest::Contains("got mean 0.5, std 0 (channel 1)"), ValueError);
  CHECK_THROWS_AS(Normalization::per_channel({0.5f}, {1.f, 1.f}), ValueError);
  CHECK_THROWS_WITH_AS((ImageDataset<Shape<1, 2, 2>>::from_pixels(std::vector<std::uint8_t>(4), label, 1, rgb)),
                       doctest::Contains("the images have 1 channel(s) (1x2x2), the normalisation has 3"), ValueError);
  CHECK_THROWS_WITH_AS((ImageDataset<Shape<3, 2, 2>>::from_pixels(std::vector<std::uint8_t>(11), label, 1, rgb)),
                       doctest::Contains("1 labels need 12 bytes of images (3x2x2 each), found 11"), ShapeError);
}

TEST_CASE("CIFAR: a missing directory or file is an IoError listing the names looked for") {
  TempDir dir("cohort_cifar_");
  CHECK_THROWS_WITH_AS(find_cifar_files(dir.path / "nowhere", CifarVariant::cifar10, Split::test),
                       doctest::Contains("nowhere: no CIFAR-10 test data: looked for test_batch.bin; missing: "
                                         "test_batch.bin (the directory does not exist)"),
                       IoError);
  write_cifar10(dir.path);
  fs::remove(dir.path / "data_batch_3.bin");
  fs::remove(dir.path / "data_batch_5.bin");
  CHECK_THROWS_WITH_AS(read_cifar(dir.path, CifarVariant::cifar10, Split::train),
                       doctest::Contains("no CIFAR-10 training data: looked for data_batch_1.bin, data_batch_2.bin, "
                                         "data_batch_3.bin, data_batch_4.bin, data_batch_5.bin; missing: "
                                         "data_batch_3.bin, data_batch_5.bin"),
                       IoError);
  // The other variant's directory: say so.
  CHECK_THROWS_WITH_AS(read_cifar(dir.path, CifarVariant::cifar100, Split::train),
                       doctest::Contains("looked for train.bin; missing: train.bin (the directory holds CIFAR-10's "
                                         "data_batch_*.bin: use CifarVariant::cifar10)"),
                       IoError);
}

TEST_CASE("CIFAR: an empty file, a size that is not whole records, or the other variant is a FormatError") {
  TempDir dir("cohort_cifar_");
  const fs::path f = dir.path / "test_batch.bin";
  write(f, {});
  const std::vector<fs::path> files{f};
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar10),
                       doctest::Contains("test_batch.bin: empty file, expected CIFAR-10 records of 3073 bytes (1 "
                                         "label byte + 3072 pixel bytes)"),
                       FormatError);
  auto truncated = records({{1}, {2}});
  truncated.pop_back();
  write(f, truncated);
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar10),
                       doctest::Contains("test_batch.bin: size 6145 bytes is not a multiple of the CIFAR-10 record "
                                         "size 3073 (1 label byte + 3072 pixel bytes): truncated?"),
                       FormatError);
  // A CIFAR-100 file (3 records of 3074 bytes) read as CIFAR-10, and the other way round.
  write(f, records({{1, 2}, {3, 4}, {5, 6}}));
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar10),
                       doctest::Contains("size 9222 bytes is not a multiple of the CIFAR-10 record size 3073 (1 label "
                                         "byte + 3072 pixel bytes): truncated, or a CIFAR-100 file (3 records of 3074 "
                                         "bytes)?"),
                       FormatError);
  write(f, records({{1}, {2}}));
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar100),
                       doctest::Contains("record size 3074 (2 label bytes + 3072 pixel bytes): truncated, or a "
                                         "CIFAR-10 file (2 records of 3073 bytes)?"),
                       FormatError);
}

TEST_CASE("CIFAR: a label outside the classes is a FormatError naming file, record, label and range") {
  TempDir dir("cohort_cifar_");
  const fs::path f = dir.path / "f.bin";
  const std::vector<fs::path> files{f};
  write(f, records({{3}, {9}, {10}}));
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar10),
                       doctest::Contains("f.bin: record 2 has label 10, expected a class in [0, 10) for CIFAR-10"),
                       FormatError);
  write(f, records({{19, 99}, {20, 5}}));
  CHECK(read_cifar(files, CifarVariant::cifar100).size() == 2); // fine labels are fine
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar100, CifarLabels::coarse),
                       doctest::Contains("f.bin: record 1 has coarse label 20, expected a class in [0, 20) for "
                                         "CIFAR-100"),
                       FormatError);
  write(f, records({{0, 100}}));
  CHECK_THROWS_WITH_AS(read_cifar(files, CifarVariant::cifar100),
                       doctest::Contains("record 0 has fine label 100, expected a class in [0, 100)"), FormatError);
  // Every failure is a cohort::Error (a file that cannot be opened too).
  CHECK_THROWS_AS(read_cifar(std::vector<fs::path>{dir.path / "absent.bin"}, CifarVariant::cifar10), IoError);
}

TEST_CASE("CIFAR: a 3x32x32 network trains on a written file with crop and flip (SingleDevice, ThreadedReplicas)") {
  // Learnable colour data: the class picks the bright channel (3) and the bright half (2 of 4
  // quadrant pairs), on noise. 240 training records, 60 test records.
  TempDir dir("cohort_cifar_");
  auto make = [](std::size_t n, unsigned salt) {
    std::vector<char> out;
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint8_t label = std::uint8_t((r * 7 + salt) % 6);
      out.push_back(char(label)); // coarse
      out.push_back(char(label)); // fine
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t y = 0; y < 32; ++y)
          for (std::size_t x = 0; x < 32; ++x) {
            const bool bright = c == label % 3 && (y < 16) == (label < 3);
            out.push_back(char((bright ? 160 : 20) + (r * 31 + c * 17 + y * 13 + x * 7 + salt) % 60));
          }
    }
    return out;
  };
  write(dir.path / "train.bin", make(240, 1));
  write(dir.path / "test.bin", make(60, 2));
  const auto raw = read_cifar(dir.path, CifarVariant::cifar100, Split::train, CifarLabels::coarse);
  const Normalization norm = raw.statistics();
  const auto train = raw.dataset(norm);
  const auto test = load_cifar(dir.path, CifarVariant::cifar100, Split::test, norm, CifarLabels::coarse);
  using Net = Sequential<Input<3, 32, 32>, Conv2d<3, 8, 3, 1, 1>, ReLU, MaxPool2d<4>, Flatten, Linear<512, 20>>;
  TrainerOptions o{.batch_size = 40, .seed = 3, .log = nullptr};
  o.augment = parse_augmentation("crop=4,flip", 32, norm);
  o.parallel.deterministic = true;
  o.parallel.deterministic_chunks = 2;
  Trainer<Net, Adam<>> one(Adam({.lr = 3e-3}), o);
  const auto history = one.fit(train, 4, &test);
  CHECK(*history.back().test_accuracy > 80.0);
  CHECK(history.back().train_loss < history.front().train_loss);
  // Two deterministic replicas, one chunk each: the same as one replica of two chunks, bitwise.
  Trainer<Net, Adam<>, ThreadedReplicas<1>> r1(Adam({.lr = 3e-3}), o);
  Trainer<Net, Adam<>, ThreadedReplicas<2>> r2(Adam({.lr = 3e-3}), o);
  r1.fit(train, 2);
  r2.fit(train, 2);
  CHECK(std::equal(r1.parameters().values.begin(), r1.parameters().values.end(), r2.parameters().values.begin()));
}
