// ImageFolder: torchvision's class list and sample order (fixture made by torchvision itself),
// pixels equal to decode + transforms + normalise, samples independent of the worker count, and
// every bad file or folder reported by name before training (or skipped and listed).

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/data/image_folder.hpp>

#include "support/fixture_dir.hpp"
#include "support/png_folder.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

using Folder = ImageFolder<Shape<1, 28, 28>>;

fs::path fixture_folder() { return fs::path(COHORT_FIXTURE_DIR) / "images" / "folder"; }

std::vector<float> load_all(const Folder& f, std::uint64_t epoch) {
  std::vector<std::size_t> idx(f.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = idx.size() - 1 - i; // any order
  std::vector<float> out(idx.size() * 784);
  f.load_samples(idx, out, SampleDraw{.seed = 5, .epoch = epoch});
  return out;
}

void write_text(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

} // namespace

TEST_CASE("ImageFolder: classes and samples in torchvision.datasets.ImageFolder's order") {
  std::ifstream in(fs::path(COHORT_FIXTURE_DIR) / "images" / "folder_samples.txt");
  REQUIRE(in);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> classes;
  std::stringstream cl(line.substr(std::string("classes|").size()));
  for (std::string c; std::getline(cl, c, '|');) classes.push_back(c);
  std::vector<std::pair<std::string, int>> expected;
  while (std::getline(in, line)) {
    const auto bar = line.rfind('|');
    expected.emplace_back(line.substr(0, bar), std::stoi(line.substr(bar + 1)));
  }
  const auto f = ImageFolder<Shape<3, 6, 5>>::open(fixture_folder(), {.crop = FolderCrop::none});
  CHECK(f.class_names() == classes);
  CHECK(f.num_classes() == classes.size());
  REQUIRE(f.size() == expected.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    CAPTURE(i);
    CHECK(fs::relative(f.path(i), fixture_folder()).string() == expected[i].first);
    CHECK(f.label(i) == expected[i].second);
  }
}

TEST_CASE("ImageFolder: a sample is the decoded file, transformed and normalised") {
  const auto norm = Normalization::per_channel({0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f});
  const auto f = ImageFolder<Shape<3, 4, 4>>::open(fixture_folder(), {.normalization = norm, .workers = 2});
  std::vector<float> got(2 * 48);
  const std::vector<std::size_t> idx{7, 2};
  f.load_samples(idx, got, {});
  for (std::size_t k = 0; k < 2; ++k) {
    const Image8 img = center_crop(read_image(f.path(idx[k]), 3), 4, 4);
    std::vector<float> want(48);
    to_normalized_chw(img, norm, want);
    CHECK(std::vector<float>(got.begin() + std::ptrdiff_t(48 * k), got.begin() + std::ptrdiff_t(48 * (k + 1))) == want);
  }
}

TEST_CASE("ImageFolder: random crops and flips depend on (seed, epoch, index) only, never on the workers") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a", "b", "c"}, 6, 40, 36);
  ImageFolderOptions o{.resize = 32, .crop = FolderCrop::random_resized, .horizontal_flip = true};
  o.workers = 0;
  const auto serial = load_all(Folder::open(dir.path, o), 3);
  for (const std::size_t workers : {1, 3}) {
    CAPTURE(workers);
    o.workers = workers;
    const auto f = Folder::open(dir.path, o);
    CHECK(load_all(f, 3) == serial);
    CHECK(load_all(f, 4) != serial); // another epoch draws other crops
  }
}

TEST_CASE("ImageFolder: to_memory gives the samples load_samples gives") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"x", "y"}, 3);
  const auto f = Folder::open(dir.path);
  const auto m = f.to_memory();
  REQUIRE(m.size() == f.size());
  std::vector<float> x(784);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const std::size_t one[] = {i};
    f.load_samples(one, x, {});
    CHECK(std::vector<float>(m.image(i), m.image(i) + 784) == x);
    CHECK(m.label(i) == f.label(i));
  }
}

TEST_CASE("ImageFolder: folder mistakes are IoErrors naming the directory") {
  test::TempDir dir;
  CHECK_THROWS_WITH_AS(Folder::open(dir.path / "nope"), doctest::Contains("not a directory"), IoError);
  CHECK_THROWS_WITH_AS(Folder::open(dir.path), doctest::Contains("no class directories"), IoError);
  test::write_band_folder(dir.path, {"cat"}, 2);
  fs::create_directories(dir.path / "dog");
  write_text(dir.path / "dog" / "readme.txt", "no images here");
  CHECK_THROWS_WITH_AS(Folder::open(dir.path), doctest::Contains("no image in the class directory \"dog\""), IoError);
}

TEST_CASE("ImageFolder: a bad file is a FormatError naming it at open, or skipped and listed") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a", "b"}, 3);
  const auto png = read_file(dir.path / "a" / "0.png");
  auto put = [&](const fs::path& rel, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(dir.path / rel, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  };
  put("b/empty.png", {});
  CHECK_THROWS_WITH_AS(Folder::open(dir.path),
                       doctest::Contains(((dir.path / "b" / "empty.png").string() + ": the file is empty").c_str()),
                       FormatError);
  const auto skipping = Folder::open(dir.path, {.bad_files = BadFiles::skip});
  CHECK(skipping.size() == 6);
  REQUIRE(skipping.skipped().size() == 1);
  CHECK(skipping.skipped()[0].path == dir.path / "b" / "empty.png");
  CHECK(skipping.skipped()[0].reason.find("the file is empty") != std::string::npos);
  fs::remove(dir.path / "b" / "empty.png");

  put("a/photo.jpg", png); // PNG content under a JPEG name
  CHECK_THROWS_WITH_AS(Folder::open(dir.path), doctest::Contains("photo.jpg: the extension says JPEG"), FormatError);
  fs::remove(dir.path / "a" / "photo.jpg");

  put("a/scan.BMP", png); // a format torchvision lists and cohort does not decode
  CHECK_THROWS_WITH_AS(Folder::open(dir.path), doctest::Contains("scan.BMP: .bmp images are not decoded by cohort"),
                       FormatError);
  fs::remove(dir.path / "a" / "scan.BMP");

  // Damaged pixel data behind a valid header: found by FolderCheck::decode at open, else by the
  // batch that decodes it (naming the file, never a black or gray image).
  put("b/cut.png", std::vector<std::uint8_t>(png.begin(), png.end() - 30));
  CHECK_THROWS_WITH_AS(Folder::open(dir.path, {.check = FolderCheck::decode}),
                       doctest::Contains("cut.png: corrupt or truncated PNG"), FormatError);
  const auto lazy = Folder::open(dir.path);
  std::vector<float> x(lazy.size() * 784);
  std::vector<std::size_t> all(lazy.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  CHECK_THROWS_WITH_AS(lazy.load_samples(all, x, {}), doctest::Contains("cut.png: corrupt or truncated PNG"),
                       FormatError);
  CHECK(Folder::open(dir.path, {.check = FolderCheck::decode, .bad_files = BadFiles::skip}).size() == 6);
}

TEST_CASE("ImageFolder: without a crop, an image of another size is a ShapeError naming the file at open") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a"}, 2);
  test::write_png(dir.path / "a" / "wide.png", 30, 28, 1, std::vector<std::uint8_t>(30 * 28, 7));
  CHECK_THROWS_WITH_AS(
      Folder::open(dir.path, {.crop = FolderCrop::none}),
      doctest::Contains("wide.png: the image is 30x28 (width x height), the network's input is 1x28x28"), ShapeError);
  // Resize(28) makes it 30x28 too (the shorter side is 28); a center crop fits it.
  CHECK(Folder::open(dir.path, {.resize = 28}).size() == 3);
}

TEST_CASE("ImageFolder: options that cannot work are ValueErrors before any file is read") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a"}, 1);
  CHECK_THROWS_WITH_AS(
      Folder::open(dir.path, {.normalization = Normalization::per_channel({0.1f, 0.2f, 0.3f}, {1, 1, 1})}),
      doctest::Contains("the network's input 1x28x28 has 1 channel(s), the normalisation has 3"), ValueError);
  CHECK_THROWS_WITH_AS(Folder::open(dir.path, {.crop = FolderCrop::random_resized, .scale = {0.5, 0.1}}),
                       doctest::Contains("RandomResizedCrop needs 0 < scale.first <= scale.second"), ValueError);
}

TEST_CASE("ImageFolder: with cache, files are decoded once and the samples are the same") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a", "b"}, 4, 36, 32);
  const ImageFolderOptions o{.resize = 30, .crop = FolderCrop::random_resized, .horizontal_flip = true};
  const auto plain = Folder::open(dir.path, o);
  auto cached_options = o;
  cached_options.cache = true;
  const auto cached = Folder::open(dir.path, cached_options);
  CHECK(load_all(cached, 0) == load_all(plain, 0));
  const auto epoch1 = load_all(plain, 1);
  fs::remove_all(dir.path / "a");       // the files are gone: only the cache can serve them now
  CHECK(load_all(cached, 1) == epoch1); // other crops than epoch 0's, from the cached pixels
  CHECK_THROWS_AS(load_all(plain, 1), IoError);
}
