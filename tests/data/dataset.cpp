#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <cohort/data/dataset.hpp>

#include "support/idx_bytes.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::Bytes;
using test::pattern;
using test::TempDir;
using test::write_idx;

using Small = Shape<1, 4, 3>; // H != W, so a transposed check would show
} // namespace

TEST_CASE("Dataset: loads IDX images and labels normalised like ToTensor then Normalize") {
  TempDir dir("cohort_test_dataset_");
  Bytes pixels = pattern(5 * 4 * 3);
  pixels[0] = 0;
  pixels[1] = 51;
  pixels[2] = 255;
  const auto images = write_idx(dir.path / "images", idx_images_magic, {5, 4, 3}, pixels);
  const auto labels = write_idx(dir.path / "labels", idx_labels_magic, {5}, {2, 0, 1, 2, 1});
  const Normalization norm{0.5f, 0.25f};
  const auto d = ImageDataset<Small>::load(images, labels, 3, norm);

  CHECK(d.size() == 5);
  CHECK(d.num_classes() == 3);
  CHECK(d.images().size() == 5 * 12);
  CHECK(d.labels().size() == 5);
  CHECK(d.label(0) == 2);
  CHECK(d.label(4) == 1);
  // Hand computation: (0/255 - 0.5)/0.25 = -2, (51/255 - 0.5)/0.25 = -1.2, (1 - 0.5)/0.25 = 2.
  CHECK(d.image(0)[0] == -2.f);
  CHECK(d.image(0)[1] == doctest::Approx(-1.2f).epsilon(1e-6));
  CHECK(d.image(0)[2] == 2.f);
  // Every value is PyTorch's float32 op order exactly, and samples are contiguous.
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(d.image(i) == d.images().data() + i * 12);
    for (std::size_t j = 0; j < 12; ++j) CHECK(d.image(i)[j] == (float(pixels[i * 12 + j]) / 255.f - 0.5f) / 0.25f);
  }
  // IdxFiles overload; identity normalisation leaves pixel / 255.
  const auto raw = ImageDataset<Small>::load(IdxFiles{images, labels}, 3, Normalization{});
  CHECK(raw.image(0)[1] == 51.f / 255.f);
}

TEST_CASE("Dataset: Normalization::of matches a hand computation") {
  // pixel / 255 = 0, 0.2, 0.4, 1: mean 0.4, population variance (0.16 + 0.04 + 0 + 0.36) / 4 = 0.14.
  const Bytes p{0, 51, 102, 255};
  const auto n = Normalization::of(p);
  CHECK(n.mean == doctest::Approx(0.4).epsilon(1e-7));
  CHECK(n.std == doctest::Approx(std::sqrt(0.14)).epsilon(1e-7));
  const IdxArray a{"x", {2, 1, 2}, p};
  CHECK(Normalization::of(a).mean == n.mean);
  CHECK(Normalization::of(a).std == n.std);
  // A constant image set only shifts; an empty one is left alone.
  const auto flat = Normalization::of(Bytes(10, 255));
  CHECK(flat.mean == 1.f);
  CHECK(flat.std == 1.f);
  CHECK(Normalization::of(Bytes{}).mean == 0.f);
  CHECK(Normalization::of(Bytes{}).std == 1.f);
  // A normalisation that cannot be applied is refused before anything is converted.
  CHECK_THROWS_WITH_AS(Normalization({0.f, 0.f}).table(), doctest::Contains("std must be positive"), ValueError);
  CHECK_THROWS_AS(Normalization({0.f, -1.f}).table(), ValueError);
  CHECK_THROWS_AS(Normalization({NAN, 1.f}).table(), ValueError);
}

TEST_CASE("Dataset: image and label counts that differ name both files and both counts") {
  TempDir dir("cohort_test_dataset_");
  const auto images = write_idx(dir.path / "imgs", idx_images_magic, {4, 4, 3}, pattern(48));
  const auto labels = write_idx(dir.path / "lbls", idx_labels_magic, {3}, {0, 1, 0});
  CHECK_THROWS_WITH_AS(
      ImageDataset<Small>::load(images, labels, 2, {}),
      doctest::Contains((images.string() + " has 4 images but " + labels.string() + " has 3 labels").c_str()),
      FormatError);
}

TEST_CASE("Dataset: a label outside the classes is a FormatError naming file, sample and label") {
  TempDir dir("cohort_test_dataset_");
  const auto images = write_idx(dir.path / "imgs", idx_images_magic, {3, 4, 3}, pattern(36));
  const auto labels = write_idx(dir.path / "lbls", idx_labels_magic, {3}, {0, 9, 10});
  CHECK_NOTHROW(
      ImageDataset<Small>::load(images, write_idx(dir.path / "ok", idx_labels_magic, {3}, {0, 9, 9}), 10, {}));
  CHECK_THROWS_WITH_AS(
      ImageDataset<Small>::load(images, labels, 10, {}),
      doctest::Contains((labels.string() + ": label of sample 2 is 10, expected a class in [0, 10)").c_str()),
      FormatError);
  CHECK_THROWS_AS(ImageDataset<Small>::load(images, labels, 0, {}), ValueError);
}

TEST_CASE("Dataset: 32x32 images for a 28x28 network are a ShapeError naming both shapes") {
  TempDir dir("cohort_test_dataset_");
  const auto images = write_idx(dir.path / "train-images-idx3-ubyte", idx_images_magic, {2, 32, 32}, Bytes(2048));
  const auto labels = write_idx(dir.path / "train-labels-idx1-ubyte", idx_labels_magic, {2}, {0, 1});
  using Mnist = ImageDataset<Shape<1, 28, 28>>; // (the macros cannot take the commas)
  CHECK_THROWS_WITH_AS(Mnist::load(images, labels, 10, {}),
                       doctest::Contains((images.string() + ": network expects 1x28x28, file has 32x32").c_str()),
                       ShapeError);
  // Transposed H and W are caught too.
  const auto t = write_idx(dir.path / "t", idx_images_magic, {2, 3, 4}, Bytes(24));
  CHECK_THROWS_WITH_AS(ImageDataset<Small>::load(t, labels, 10, {}),
                       doctest::Contains("network expects 1x4x3, file has 3x4"), ShapeError);
  // Swapped files: the labels file read as images fails on its magic.
  CHECK_THROWS_WITH_AS(ImageDataset<Small>::load(labels, images, 10, {}), doctest::Contains("expected magic 2051"),
                       FormatError);
}

TEST_CASE("Dataset: a repeated view maps sample i to sample i mod n without copying") {
  HostBuffer<float> x(3 * Small::size);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  HostBuffer<std::int32_t> y(3);
  y[0] = 4;
  y[1] = 5;
  y[2] = 6;
  const ImageDataset<Small> d(std::move(x), std::move(y), 7);
  for (std::size_t times : {1u, 4u, 8u}) {
    const auto r = d.repeated(times);
    CHECK(r.size() == 3 * times);
    CHECK(r.times() == times);
    CHECK(r.num_classes() == 7);
    CHECK(&r.base() == &d);
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK(r.source_index(i) == i % 3);
      CHECK(r.image(i) == d.image(i % 3)); // the same memory: nothing was copied
      CHECK(r.label(i) == d.label(i % 3));
    }
  }
  const RepeatedView<Small> eight(d, 8);
  CHECK(eight.label(23) == 6);
  CHECK_THROWS_WITH_AS(d.repeated(0), doctest::Contains("times must be at least 1"), ValueError);
}

TEST_CASE("Dataset: the in-memory constructor checks sizes and labels") {
  CHECK_THROWS_WITH_AS(ImageDataset<Small>(HostBuffer<float>(11), HostBuffer<std::int32_t>(1), 2),
                       doctest::Contains("1 labels need 12 floats of images (1x4x3 each), found 11"), ShapeError);
  HostBuffer<std::int32_t> y(2);
  y[1] = -1;
  CHECK_THROWS_WITH_AS(ImageDataset<Small>(HostBuffer<float>(24), y, 2),
                       doctest::Contains("label of sample 1 is -1, expected a class in [0, 2)"), ValueError);
  const ImageDataset<Small> empty;
  CHECK(empty.size() == 0);
  CHECK(empty.images().empty());
}

TEST_CASE("Dataset: find_idx_files prefers raw files, falls back to gz, and lists what it looked for") {
  TempDir dir("cohort_test_dataset_");
  CHECK_THROWS_WITH_AS(find_idx_files(dir.path, Split::train),
                       doctest::Contains("no train images file: looked for train-images-idx3-ubyte and "
                                         "train-images-idx3-ubyte.gz"),
                       IoError);
  CHECK_THROWS_WITH_AS(find_idx_files(dir.path / "nowhere", Split::test),
                       doctest::Contains("t10k-images-idx3-ubyte.gz (the directory does not exist)"), IoError);
  for (const char* name : {"t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    std::ofstream(dir.path / name) << "x";
  const auto f = find_idx_files(dir.path, Split::test);
  CHECK(f.images == dir.path / "t10k-images-idx3-ubyte");
  CHECK(f.labels == dir.path / "t10k-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH_AS(find_idx_files(dir.path, Split::train), doctest::Contains("no train images file"), IoError);
}

TEST_CASE("Dataset: Fashion-MNIST from the Debian package has 6000 and 1000 samples of each class") {
  if (!fs::is_directory(default_data_dir))
    COHORT_SKIP(default_data_dir.string() << " does not exist (apt install dataset-fashion-mnist)");
  using Data = ImageDataset<Shape<1, 28, 28>>;
  const auto files = find_idx_files(default_data_dir, Split::train);
  const auto train_images = read_idx(files.images, idx_images_magic);
  const auto norm = Normalization::of(train_images);
  // The values quoted for Fashion-MNIST's training set.
  CHECK(norm.mean == doctest::Approx(0.2860).epsilon(1e-3));
  CHECK(norm.std == doctest::Approx(0.3530).epsilon(1e-3));
  const auto train = Data::from_idx(train_images, read_idx(files.labels, idx_labels_magic), 10, norm);
  const auto test = Data::load(find_idx_files(default_data_dir, Split::test), 10, norm);

  const std::pair<const Data*, std::size_t> splits[] = {{&train, 60000}, {&test, 10000}};
  for (const auto& [data, n] : splits) {
    CHECK(data->size() == n);
    std::array<std::size_t, 10> per_class{};
    for (const auto label : data->labels()) {
      REQUIRE(label >= 0);
      REQUIRE(label < 10);
      ++per_class[std::size_t(label)];
    }
    for (const auto c : per_class) CHECK(c == n / 10);
  }
}
