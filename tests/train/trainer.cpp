// The trainer in-process: exact resume (N steps straight == N/2, save, fresh objects, load, N/2),
// strict and atomic checkpoint loading, metrics, and evaluation.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::Bands;

using test::TempDir;
using test::trained_weights;

template <class Net, class Opt>
void check_exact_resume(Opt opt, std::uint64_t total, std::uint64_t half) {
  const Bands data(100, 1); // 5 batches per epoch (the last one short): resumes cross epochs
  TempDir dir("cohort_trainer_");
  const auto straight = trained_weights<Net, SingleDevice<>>(opt, data, total);
  trained_weights<Net, SingleDevice<>>(opt, data, half, dir.path / "half.safetensors");
  const auto resumed = trained_weights<Net, SingleDevice<>>(opt, data, total, {}, dir.path / "half.safetensors");
  CHECK(straight == resumed); // bitwise
}
} // namespace

TEST_CASE("Trainer: resuming from a checkpoint is bitwise exact (dropout, Adadelta)") {
  check_exact_resume<models::ModelA>(Adadelta({.lr = 0.5}), 13, 7); // mid-epoch, different epoch
}
TEST_CASE("Trainer: resuming is bitwise exact with BatchNorm statistics and SGD momentum") {
  check_exact_resume<models::ModelB>(Sgd({.lr = 0.05, .momentum = 0.9}), 12, 5);
}
TEST_CASE("Trainer: resuming is bitwise exact with Adam") {
  check_exact_resume<models::ModelC>(Adam({.lr = 1e-3, .eps = 1e-7}), 9, 5); // at an epoch boundary
}

TEST_CASE("Trainer: learns, evaluates and writes seed 003's metrics") {
  const Bands train(600, 2), test(200, 3);
  TempDir dir("cohort_trainer_");
  std::ostringstream log;
  Trainer<models::ModelC, Adam<>> t(Adam({.lr = 1e-3, .eps = 1e-7}), {.batch_size = 50,
                                                                      .log_interval = 4,
                                                                      .log = &log,
                                                                      .metrics = dir.path / "m.jsonl",
                                                                      .model_size = "small",
                                                                      .n_dataset_repeat = 1});
  const auto history = t.fit(train, 2, &test);
  REQUIRE(history.size() == 2);
  CHECK(history[1].test_accuracy.value() > 90.0);
  CHECK(t.epoch() == 2);
  CHECK(t.step() == 24);
  CHECK(log.str().find("epoch: 1 [8/12 (67%)]\ttraining loss: ") != std::string::npos);
  std::ifstream in(dir.path / "m.jsonl");
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first.find("\"n_dataset_repeat\": 1, \"batch_size\": 50, \"n_devices\": 1, \"parallel\": \"SingleDevice\", "
                   "\"model_size\": \"small\"") != std::string::npos);
  CHECK(first.find("\"second epoch time\": null") != std::string::npos);
  CHECK(second.find("\"second epoch time\": null") == std::string::npos);
  CHECK(second.find("\"test_accuracy\": ") != std::string::npos);
  CHECK(second.find("\"samples_per_s\": ") != std::string::npos);
}

TEST_CASE("Checkpoints: a mismatching or corrupt checkpoint changes nothing and names every problem") {
  const Bands data(48, 4);
  TempDir dir("cohort_trainer_");
  Trainer<models::ModelC, Adam<>> c(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  c.fit(data, 1);
  c.save(dir.path / "c.safetensors");

  Trainer<models::ModelB, Adam<>> b(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  const std::vector<float> before(b.parameters().values.begin(), b.parameters().values.end());
  try {
    b.resume(dir.path / "c.safetensors");
    FAIL("a model C checkpoint loaded into model B");
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    CHECK(m.find("c.safetensors: does not fit") != std::string::npos);
    CHECK(m.find("0.weight: shape 32x1x3x3 in the file, 16x1x5x5 in the network") != std::string::npos);
    CHECK(m.find("1.running_mean: missing") != std::string::npos);
    CHECK(m.find("nothing was loaded") != std::string::npos);
  }
  CHECK(std::equal(before.begin(), before.end(), b.parameters().values.begin()));

  Trainer<models::ModelC, Sgd<>> other_opt(Sgd({.lr = 0.1}), {.batch_size = 16, .log = nullptr});
  CHECK_THROWS_WITH_AS(other_opt.resume(dir.path / "c.safetensors"),
                       doctest::Contains("optimizer: the file was written by Adam, this run uses SGD"),
                       CheckpointError);
  // Weights alone load into any optimiser (--init-from), strictly by name.
  CHECK_NOTHROW(other_opt.init_from(dir.path / "c.safetensors"));

  // A truncated checkpoint is a FormatError, and the network is untouched.
  std::ifstream in(dir.path / "c.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir.path / "cut.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  Trainer<models::ModelC, Adam<>> fresh(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  const std::vector<float> init(fresh.parameters().values.begin(), fresh.parameters().values.end());
  CHECK_THROWS_AS(fresh.resume(dir.path / "cut.safetensors"), FormatError);
  CHECK(std::equal(init.begin(), init.end(), fresh.parameters().values.begin()));
  CHECK(fresh.step() == 0);
}

TEST_CASE("Checkpoints: tensors keep PyTorch's names and dtypes, weights files have no optimiser state") {
  TempDir dir("cohort_trainer_");
  Network<models::ModelB> net(3);
  save_weights(dir.path / "w.safetensors", net.parameters());
  const auto f = SafetensorsFile::read(dir.path / "w.safetensors");
  CHECK(f.entries().size() == 16);
  CHECK(f.at("1.num_batches_tracked").dtype == DType::i64);
  CHECK(f.at("9.weight").shape == std::vector<std::size_t>{10, 1568});
  CHECK(f.metadata().at("format") == "pt");
  Network<models::ModelB> other(4);
  load_weights(dir.path / "w.safetensors", other.parameters());
  CHECK(std::equal(net.parameters().values.begin(), net.parameters().values.end(), other.parameters().values.begin()));
}

TEST_CASE("Trainer: a different batch size cannot resume in the middle of an epoch") {
  const Bands data(64, 5);
  TempDir dir("cohort_trainer_");
  Trainer<models::ModelC, Sgd<>> a(Sgd({.lr = 0.01}), {.batch_size = 16, .max_steps = 2, .log = nullptr});
  a.fit(data, 1);
  a.save(dir.path / "a.safetensors");
  Trainer<models::ModelC, Sgd<>> b(Sgd({.lr = 0.01}), {.batch_size = 32, .log = nullptr});
  b.resume(dir.path / "a.safetensors");
  CHECK_THROWS_WITH_AS(b.fit(data, 1), doctest::Contains("needs the checkpoint's batch size 16, this run has 32"),
                       ValueError);
}
