// TrainerOptions::loss (CrossEntropyOptions): passed to every engine, resumed exactly, refused
// at construction when bad or when the network's loss is NllLoss. (The engines' side:
// tests/train/engine/loss_options.cpp.)

#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/train/trainer.hpp>

#include "support/bands.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;

namespace {

using test::Bands;

/// Smoothing and uneven weights, one class of weight 0.
const CrossEntropyOptions trainer_weighted{.label_smoothing = 0.1,
                                           .class_weights = {1.f, 2.f, 0.5f, 1.5f, 3.f, 0.25f, 1.f, 2.5f, 0.f, 4.f}};

/// Weights after `steps` steps of Trainer<Net, Adam, Policy> with the trainer_weighted loss (batches of
/// 24), optionally saving at the end or resuming first (into a trainer of another seed).
template <class Net, class Policy>
std::vector<float> trainer_weights(const Bands& data, std::uint64_t steps, const std::filesystem::path& save = {},
                                   const std::filesystem::path& resume = {}) {
  TrainerOptions o{.batch_size = 24,
                   .seed = resume.empty() ? test::train_seed : test::resume_seed,
                   .max_steps = steps,
                   .log = nullptr};
  o.loss = trainer_weighted;
  Trainer<Net, Adam<>, Policy> t(Adam({.lr = 1e-3}), o);
  if (!resume.empty()) test::resume_checked(t, resume);
  t.fit(data, 10);
  if (!save.empty()) t.save(save);
  return {t.parameters().values.begin(), t.parameters().values.end()};
}

} // namespace

TEST_CASE("Trainer loss options: resumes bitwise with class weights and smoothing (2 replicas)") {
  const Bands data(100, 1);
  test::TempDir dir("cohort_loss_options_");
  using P = ThreadedReplicas<2>;
  const auto straight = trainer_weights<models::ModelC, P>(data, 7);
  trainer_weights<models::ModelC, P>(data, 3, dir.path / "half.safetensors");
  const auto resumed = trainer_weights<models::ModelC, P>(data, 7, {}, dir.path / "half.safetensors");
  CHECK(straight == resumed);
}

TEST_CASE("Trainer loss options: bad options fail when the Trainer is built, naming the loss") {
  TrainerOptions o{.log = nullptr};
  o.loss = {.class_weights = {1, 2, 3}};
  CHECK_THROWS_WITH_AS((Trainer<models::ModelC, Sgd<>>(Sgd({.lr = 0.1}), o)),
                       "CrossEntropyLoss: expected 10 class weights (one per class of the scores), found 3",
                       ShapeError);
  o.loss = {.label_smoothing = 2};
  CHECK_THROWS_WITH_AS((Trainer<models::ModelC, Sgd<>, ThreadedReplicas<2>>(Sgd({.lr = 0.1}), o)),
                       "CrossEntropyLoss: label_smoothing must be in [0, 1], found 2", ValueError);
  // Model A ends in LogSoftmax: NllLoss, which has neither option.
  o.loss = {.label_smoothing = 0.1};
  CHECK_THROWS_WITH_AS((Trainer<models::ModelA, Sgd<>>(Sgd({.lr = 0.1}), o)),
                       doctest::Contains("this network ends in LogSoftmax and trains with NllLoss"), ValueError);
}
