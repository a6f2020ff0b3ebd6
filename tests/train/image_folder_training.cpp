// Training from a folder of PNG files: the Trainer gathers ImageFolder batches through
// load_samples (decoded on the workers, on the prefetch thread), with the same results as the
// same pixels in memory, for any worker count and with or without prefetching; the class list
// goes into checkpoints, and a resume on a folder with other classes is refused.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/data/image_folder.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/png_folder.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

using Folder = ImageFolder<Shape<1, 28, 28>>;
using FolderNet = models::ModelA;

TrainerOptions quiet(std::uint64_t seed = 3, bool prefetch = true, std::size_t ahead = 2) {
  return {.batch_size = 8,
          .eval_batch_size = 16,
          .seed = seed,
          .log = nullptr,
          .prefetch = prefetch,
          .prefetch_batches = ahead};
}

std::vector<double> losses(const std::vector<EpochReport>& r) {
  std::vector<double> out;
  for (const auto& e : r) out.push_back(e.train_loss);
  return out;
}

} // namespace

TEST_CASE("ImageFolder training: a folder trains exactly as its pixels in memory do") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"low", "mid", "top"}, 12);
  const Folder folder = Folder::open(dir.path, {.normalization = {0.3f, 0.3f}});
  const auto memory = folder.to_memory();
  Trainer<FolderNet, Sgd<>> a(Sgd({.lr = 0.05}), quiet());
  Trainer<FolderNet, Sgd<>> b(Sgd({.lr = 0.05}), quiet());
  const auto from_folder = losses(a.fit(folder, 2));
  CHECK(from_folder == losses(b.fit(memory, 2)));
  CHECK(a.evaluate(folder).accuracy == b.evaluate(memory).accuracy);
  CHECK(a.class_names() == std::vector<std::string>{"low", "mid", "top"});
}

TEST_CASE("ImageFolder training: random crops and flips give the same run for any worker count and prefetch depth") {
  test::TempDir dir;
  test::write_band_folder(dir.path, {"a", "b", "c"}, 8, 34, 32);
  ImageFolderOptions o{.crop = FolderCrop::random_resized, .scale = {0.6, 1.0}, .horizontal_flip = true};
  std::vector<double> first;
  for (const std::size_t workers : {0, 2}) {
    for (const std::size_t ahead : {0, 1, 3}) { // batches prepared ahead (0: no prefetching)
      CAPTURE(workers);
      CAPTURE(ahead);
      o.workers = workers;
      const Folder f = Folder::open(dir.path, o);
      Trainer<FolderNet, Sgd<>> t(Sgd({.lr = 0.05}), quiet(3, ahead > 0, ahead));
      const auto l = losses(t.fit(f, 2));
      if (first.empty())
        first = l;
      else
        CHECK(l == first);
    }
  }
}

TEST_CASE("ImageFolder training: a checkpoint keeps the class list, and resuming on other classes is refused") {
  test::TempDir dir;
  test::write_band_folder(dir.path / "train", {"cat", "dog"}, 6);
  test::write_band_folder(dir.path / "renamed", {"cat", "wolf"}, 6);
  test::write_band_folder(dir.path / "same", {"cat", "dog"}, 6, 28, 28, 9);
  const Folder train = Folder::open(dir.path / "train");
  Trainer<FolderNet, Sgd<>> t(Sgd({.lr = 0.05}), quiet());
  t.fit(train, 1);
  t.save(dir.path / "ckpt.safetensors");
  CHECK(checkpoint_class_names(SafetensorsFile::read(dir.path / "ckpt.safetensors")) ==
        std::vector<std::string>{"cat", "dog"});

  Trainer<FolderNet, Sgd<>> resumed(Sgd({.lr = 0.05}), quiet(/*seed=*/99)); // another seed: resume must restore it
  resumed.resume(dir.path / "ckpt.safetensors");
  CHECK(resumed.class_names() == std::vector<std::string>{"cat", "dog"});
  const std::uint64_t step = resumed.step();
  CHECK_THROWS_WITH_AS(resumed.fit(Folder::open(dir.path / "renamed"), 2),
                       doctest::Contains("Trainer::fit: the dataset's classes are [\"cat\", \"wolf\"]; the model was "
                                         "trained on [\"cat\", \"dog\"]"),
                       ValueError);
  CHECK(resumed.step() == step); // refused before any step
  CHECK_THROWS_AS(resumed.evaluate(Folder::open(dir.path / "renamed")), ValueError);
  CHECK_NOTHROW(resumed.fit(Folder::open(dir.path / "same"), 2)); // other images, the same classes
}

TEST_CASE("ImageFolder training: a resumed run sees the crops an uninterrupted one sees") {
  test::TempDir dir;
  test::write_band_folder(dir.path / "data", {"a", "b", "c"}, 6, 32, 32);
  const Folder f = Folder::open(dir.path / "data", {.crop = FolderCrop::random_resized, .horizontal_flip = true});
  Trainer<FolderNet, Sgd<>> straight(Sgd({.lr = 0.05}), quiet());
  const auto all = losses(straight.fit(f, 3));
  Trainer<FolderNet, Sgd<>> first(Sgd({.lr = 0.05}), quiet());
  first.fit(f, 1);
  first.save(dir.path / "ckpt.safetensors");
  Trainer<FolderNet, Sgd<>> second(Sgd({.lr = 0.05}), quiet(/*seed=*/42));
  second.resume(dir.path / "ckpt.safetensors");
  const auto rest = losses(second.fit(f, 3));
  REQUIRE(rest.size() == 2);
  CHECK(rest[0] == all[1]);
  CHECK(rest[1] == all[2]);
}

TEST_CASE("ImageFolder training: files skipped at open are counted in the epoch report, its line and the metrics") {
  test::TempDir dir;
  test::write_band_folder(dir.path / "data", {"a", "b"}, 4);
  std::ofstream(dir.path / "data" / "b" / "empty.png").flush(); // zero bytes: skipped at open
  const Folder f = Folder::open(dir.path / "data", {.bad_files = BadFiles::skip});
  REQUIRE(f.skipped().size() == 1);
  std::ostringstream log;
  TrainerOptions o = quiet();
  o.log = &log;
  o.metrics = dir.path / "metrics.jsonl";
  Trainer<FolderNet, Sgd<>> t(Sgd({.lr = 0.05}), o);
  const auto r = t.fit(f, 1);
  REQUIRE(r.size() == 1);
  CHECK(r[0].skipped_files == std::optional<std::size_t>(1));
  CHECK(log.str().find(", 1 bad file(s) skipped") != std::string::npos);
  // An in-memory set cannot skip: null in the metrics, nothing in the line.
  const auto memory = f.to_memory();
  std::ostringstream memory_log;
  o.log = &memory_log;
  Trainer<FolderNet, Sgd<>> m(Sgd({.lr = 0.05}), o);
  CHECK_FALSE(m.fit(memory, 1)[0].skipped_files.has_value());
  CHECK(memory_log.str().find("skipped") == std::string::npos);
  std::ifstream in(dir.path / "metrics.jsonl");
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first.find("\"skipped_files\": 1,") != std::string::npos);
  CHECK(second.find("\"skipped_files\": null,") != std::string::npos);
}
