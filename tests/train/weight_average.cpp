// TrainerOptions::ema: the Trainer keeps WeightAverage (optim/weight_average.hpp) of its
// parameters, statistics and counters after every `every`-th step, exactly as feeding the same
// parameters to a WeightAverage by hand; training itself is unchanged; evaluate_ema evaluates the
// average and puts the trained weights back; fit reports the average's accuracy; checkpoints
// carry it and a resume into a trainer built with another seed continues bit for bit; a
// checkpoint and a trainer that disagree about it are refused, as is the option where the
// average is not kept (16-bit policies).

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/temp_dir.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using AveragedNet = models::ModelB; // BatchNorm: running statistics and counters are averaged too
using Params = Parameters<AveragedNet, float, Cpu>;

constexpr std::size_t batch = 20; // Bands(batch): one step per epoch

TrainerOptions options(std::uint64_t seed, std::optional<EmaOptions> ema, std::uint64_t max_steps = 0) {
  return {.batch_size = batch, .seed = seed, .max_steps = max_steps, .log = nullptr, .ema = ema};
}
Sgd<> sgd() { return Sgd({.lr = 0.05, .momentum = 0.9}); }

bool same(const Params& a, const Params& b) {
  return std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0 &&
         std::memcmp(a.buffers.data(), b.buffers.data(), a.buffers.size() * sizeof(float)) == 0 &&
         std::memcmp(a.counters.data(), b.counters.data(), a.counters.size() * sizeof(std::int64_t)) == 0;
}

} // namespace

TEST_CASE("Trainer EMA: the average is WeightAverage of the parameters after every every-th step") {
  const Bands data(batch, 1);
  for (const std::size_t every : {1, 3}) {
    CAPTURE(every);
    const EmaOptions o{.decay = 0.8, .every = every};
    Trainer<AveragedNet, Sgd<>> averaged(sgd(), options(train_seed, o));
    averaged.fit(data, 7);
    Trainer<AveragedNet, Sgd<>> plain(sgd(), options(train_seed, std::nullopt));
    WeightAverage<AveragedNet> by_hand(o);
    for (std::size_t step = 1; step <= 7; ++step) {
      plain.fit_epoch(data);
      if (step % every == 0) by_hand.update(plain.parameters());
    }
    CHECK(same(averaged.parameters(), plain.parameters())); // the average does not touch training
    REQUIRE(averaged.ema() != nullptr);
    CHECK(averaged.ema()->n_averaged() == by_hand.n_averaged());
    CHECK(same(averaged.ema()->parameters(), by_hand.parameters()));
    CHECK_FALSE(same(averaged.ema()->parameters(), averaged.parameters()));
  }
}

TEST_CASE("Trainer EMA: evaluate_ema evaluates the average and puts the trained weights back") {
  const Bands train(batch, 1), test(60, 2);
  Trainer<AveragedNet, Sgd<>> t(sgd(), options(train_seed, EmaOptions{.decay = 0.5}));
  CHECK_THROWS_WITH_AS(t.evaluate_ema(test), doctest::Contains("no update yet"), ValueError);
  const auto reports = t.fit(train, 4, &test);
  Params trained;
  trained.copy_from(t.parameters());
  const EvalReport average = t.evaluate_ema(test);
  CHECK(same(t.parameters(), trained));
  CHECK(reports.back().test_accuracy == average.accuracy); // fit reports the average (ema.evaluate)
  CHECK(reports.back().test_loss == average.loss);
  // The same evaluation from a trainer holding the average as its weights.
  Trainer<AveragedNet, Sgd<>> holder(sgd(), options(train_seed, std::nullopt));
  holder.parameters().copy_from(t.ema()->parameters());
  const EvalReport direct = holder.evaluate(test);
  CHECK(direct.accuracy == average.accuracy);
  CHECK(direct.loss == average.loss);
  CHECK(t.evaluate(test).loss != average.loss);
  Trainer<AveragedNet, Sgd<>> none(sgd(), options(train_seed, std::nullopt));
  CHECK(none.ema() == nullptr);
  CHECK_THROWS_WITH_AS(none.evaluate_ema(test), doctest::Contains("keeps no weight average"), ValueError);
}

TEST_CASE("Trainer EMA: a checkpoint carries the average, and a resume continues it bit for bit") {
  TempDir dir;
  const Bands data(batch, 1);
  const EmaOptions o{.decay = 0.7, .every = 2};
  Trainer<AveragedNet, Sgd<>> straight(sgd(), options(train_seed, o));
  straight.fit(data, 9);
  Trainer<AveragedNet, Sgd<>> first(sgd(), options(train_seed, o));
  first.fit(data, 5);
  first.save(dir.path / "ckpt.safetensors");
  Trainer<AveragedNet, Sgd<>> second(sgd(), options(resume_seed, o));
  second.resume(dir.path / "ckpt.safetensors");
  CHECK(second.ema()->n_averaged() == 2);
  second.fit(data, 9);
  CHECK(same(second.parameters(), straight.parameters()));
  CHECK(second.ema()->n_averaged() == straight.ema()->n_averaged());
  CHECK(same(second.ema()->parameters(), straight.ema()->parameters()));

  // Disagreements are refused before anything changes.
  Trainer<AveragedNet, Sgd<>> without(sgd(), options(resume_seed, std::nullopt));
  CHECK_THROWS_WITH_AS(without.resume(dir.path / "ckpt.safetensors"),
                       doctest::Contains("holds a weight average (TrainerOptions::ema) and this trainer keeps none"),
                       CheckpointError);
  Trainer<AveragedNet, Sgd<>> other(sgd(), options(resume_seed, EmaOptions{.decay = 0.9, .every = 2}));
  CHECK_THROWS_WITH_AS(other.resume(dir.path / "ckpt.safetensors"),
                       doctest::Contains("weight average: the checkpoint's decay 0.69999999999999996, every 2; "
                                         "this trainer's decay 0.90000000000000002, every 2"),
                       CheckpointError);
  CHECK(other.ema()->n_averaged() == 0);
  Trainer<AveragedNet, Sgd<>> plain(sgd(), options(train_seed, std::nullopt));
  plain.fit(data, 1);
  plain.save(dir.path / "plain.safetensors");
  CHECK_THROWS_WITH_AS(second.resume(dir.path / "plain.safetensors"),
                       doctest::Contains("keeps a weight average (TrainerOptions::ema) and the checkpoint has none"),
                       CheckpointError);
}

TEST_CASE("Trainer EMA: ThreadedReplicas average the shared parameters as SingleDevice does") {
  const Bands data(batch, 1);
  const EmaOptions o{.decay = 0.6};
  Trainer<AveragedNet, Sgd<>, ThreadedReplicas<2>> replicas(
      sgd(), {.batch_size = batch, .seed = train_seed, .log = nullptr, .parallel = {.deterministic = true}, .ema = o});
  replicas.fit(data, 4);
  Trainer<AveragedNet, Sgd<>, ThreadedReplicas<2>> plain(
      sgd(), {.batch_size = batch, .seed = train_seed, .log = nullptr, .parallel = {.deterministic = true}});
  WeightAverage<AveragedNet> by_hand(o);
  for (int step = 0; step < 4; ++step) {
    plain.fit_epoch(data);
    by_hand.update(plain.parameters());
  }
  CHECK(same(replicas.ema()->parameters(), by_hand.parameters()));
}

TEST_CASE("Trainer EMA: refused where the average is not kept (16-bit policies)") {
  using Bf16Trainer = Trainer<AveragedNet, Sgd<>, SingleDevice<>, MixedPrecision<bf16>>;
  CHECK_THROWS_WITH_AS(Bf16Trainer(sgd(), options(train_seed, EmaOptions{})),
                       doctest::Contains("TrainerOptions::ema is kept for full-precision CPU policies"), ValueError);
}
