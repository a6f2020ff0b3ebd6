// The trainer in-process: exact resume (N steps straight == N/2, save, fresh objects of another
// seed, load, N/2), metrics, and evaluation. Checkpoint loading itself (strict, checksummed,
// init_from, nothing changed on error): tests/train/checkpoint.cpp.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/schedule_check.hpp"
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

TEST_CASE("Trainer: resuming is bitwise exact with AdamW, RMSprop, parameter groups and gradient clipping") {
  AdamW<> adamw({.lr = 1e-3, .weight_decay = 0.05});
  adamw.set_parameter_groups(parameter_groups<models::ModelB>(no_decay_on_norms_and_biases()));
  adamw.set_max_grad_norm(0.5);
  check_exact_resume<models::ModelB>(adamw, 12, 5);
  RmsProp<> rmsprop({.lr = 1e-3, .momentum = 0.9, .centered = true});
  rmsprop.set_max_grad_norm(0.5);
  check_exact_resume<models::ModelB>(rmsprop, 12, 7);
}

namespace {
/// Model B, 8 steps of SGD with the ResNet recipe's groups and clipping under Parallel and
/// Precision: (weights, the last step's gradient norm).
template <class Parallel, class Precision = FullPrecision>
std::pair<std::vector<float>, double> clipped_run(double max_norm, std::size_t chunks = 0) {
  const Bands data(100, 1);
  TrainerOptions o{.batch_size = 24, .seed = 5, .max_steps = 8, .log = nullptr};
  o.parameter_groups = no_decay_on_norms_and_biases();
  o.max_grad_norm = max_norm;
  o.parallel.deterministic = chunks != 0;
  o.parallel.deterministic_chunks = chunks ? chunks : 1;
  Trainer<models::ModelB, Sgd<>, Parallel, Precision> t(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}), o);
  t.fit(data, 10);
  return {std::vector<float>(t.parameters().values.begin(), t.parameters().values.end()), t.last_grad_norm()};
}
} // namespace

TEST_CASE("Trainer: gradients are clipped after the replicas' sum and after fp16 unscaling") {
  const auto [single, single_norm] = clipped_run<SingleDevice<>>(0.5);
  const auto [unclipped, no_norm] = clipped_run<SingleDevice<>>(0.0);
  CHECK(single != unclipped);
  CHECK(std::isnan(no_norm));
  CHECK(single_norm > 0.5); // the last step clipped (the norm is measured before clipping)
  // Every replica clips by the norm of the summed gradients: 2 and 4 replicas, bitwise alike.
  const auto [two, two_norm] = clipped_run<ThreadedReplicas<2>>(0.5, 4);
  const auto [four, four_norm] = clipped_run<ThreadedReplicas<4>>(0.5, 4);
  CHECK(two == four);
  CHECK(two_norm == four_norm);
  // Under fp16 the norm is the unscaled gradients' (a scaled one would be 65536 times larger):
  // 16-bit activations move it by little against the float run of the same policy (measured
  // 0.03% for fp16, 0.08% for bf16; bounds 10x that).
  const auto [half, half_norm] = clipped_run<SingleDevice<>, MixedPrecision<fp16>>(0.5);
  CHECK(half_norm == doctest::Approx(single_norm).epsilon(3e-3));
  const auto [bf, bf_norm] = clipped_run<ThreadedReplicas<2>, MixedPrecision<bf16>>(0.5);
  const auto [two_float, two_float_norm] = clipped_run<ThreadedReplicas<2>>(0.5);
  CHECK(bf_norm == doctest::Approx(two_float_norm).epsilon(1e-2));
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

TEST_CASE("Trainer: target_accuracy stops fit after the first evaluation that reaches it") {
  const Bands train(600, 2), test(200, 3);
  const auto run = [&](std::optional<double> target) {
    Trainer<models::ModelC, Adam<>> t(Adam({.lr = 1e-3, .eps = 1e-7}),
                                      {.batch_size = 50, .log = nullptr, .target_accuracy = target});
    return t.fit(train, 4, &test);
  };
  const auto all = run({});
  REQUIRE(all.size() == 4);
  // The first epoch whose accuracy reaches the target is the last one trained; the epochs
  // before it are bitwise those of the run without a target.
  const double target = all[1].test_accuracy.value();
  std::size_t first = 0;
  while (all[first].test_accuracy.value() < target) ++first; // 0 or 1
  const auto stopped = run(target);
  REQUIRE(stopped.size() == first + 1);
  CHECK(stopped.back().test_accuracy == all[first].test_accuracy);
  CHECK(stopped[0].train_loss == all[0].train_loss);
  // Refused before any step: no test set to evaluate on, or a value that is not a percentage.
  Trainer<models::ModelC, Adam<>> t(Adam({.lr = 1e-3}), {.batch_size = 50, .log = nullptr, .target_accuracy = 93});
  CHECK_THROWS_WITH_AS(
      t.fit(train, 1),
      "Trainer::fit: target_accuracy 93% needs a test set to evaluate on (fit's third argument is null)", ValueError);
  CHECK(t.step() == 0);
  using T = Trainer<models::ModelC, Adam<>>;
  CHECK_THROWS_WITH_AS(T(Adam({.lr = 1e-3}), {.log = nullptr, .target_accuracy = 0.0}),
                       "Trainer: target_accuracy 0 is not a test accuracy in % (expected a value in (0, 100])",
                       ValueError);
  CHECK_THROWS_WITH_AS(T(Adam({.lr = 1e-3}), {.log = nullptr, .target_accuracy = 193}),
                       "Trainer: target_accuracy 193 is not a test accuracy in % (expected a value in (0, 100])",
                       ValueError);
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

TEST_CASE(
    "Trainer: a learning-rate schedule equals the rates set by hand (SingleDevice, ThreadedReplicas, MixedPrecision)") {
  test::check_schedule_by_hand<SingleDevice<>, FullPrecision>();
  test::check_schedule_by_hand<ThreadedReplicas<2>, FullPrecision>();
  test::check_schedule_by_hand<SingleDevice<>, MixedPrecision<fp16>>();
  test::check_schedule_by_hand<ThreadedReplicas<2>, MixedPrecision<bf16>>();
}

TEST_CASE("Trainer: a learning-rate schedule sets every step's rate (per epoch or per step) and resumes "
          "exactly") {
  using Net = models::ModelB; // BatchNorm, SGD momentum: the rate enters the state
  const Bands data(100, 1);   // 5 steps per epoch at batch 24
  const LrSchedule schedule = LrSchedule::parse("step,step_size=1,gamma=0.5");
  const auto options = [&](std::uint64_t seed, std::uint64_t max_steps, bool scheduled) {
    TrainerOptions o{.batch_size = 24, .seed = seed, .max_steps = max_steps, .log = nullptr};
    if (scheduled) o.lr_schedule = schedule;
    return o;
  };
  const auto weights = [](auto& t) {
    return std::vector<float>(t.parameters().values.begin(), t.parameters().values.end());
  };
  Trainer<Net, Sgd<>> scheduled(Sgd({.lr = 0.05, .momentum = 0.9}), options(3, 0, true));
  scheduled.fit(data, 3);
  CHECK(scheduled.optimizer().lr() == 0.05 * 0.5 * 0.5); // the rate of epoch 2's steps
  // Stopped mid-epoch 1, resumed into a trainer of another seed: the same rates, the same weights.
  TempDir dir("cohort_schedule_");
  Trainer<Net, Sgd<>> first(Sgd({.lr = 0.05, .momentum = 0.9}), options(3, 7, true));
  first.fit(data, 3);
  first.save(dir.path / "half.safetensors");
  Trainer<Net, Sgd<>> resumed(Sgd({.lr = 0.05, .momentum = 0.9}), options(11, 0, true));
  resumed.resume(dir.path / "half.safetensors");
  resumed.fit(data, 3);
  CHECK(weights(resumed) == weights(scheduled));
  // Per optimiser step (OneCycle's use): the last step ran at the schedule's rate for step 14.
  const LrSchedule one_cycle = LrSchedule::parse("onecycle,max_lr=0.1,total_steps=15");
  TrainerOptions per_step = options(3, 0, false);
  per_step.lr_schedule = one_cycle;
  per_step.schedule_per_step = true;
  Trainer<Net, Sgd<>> cycling(Sgd({.lr = 0.05, .momentum = 0.9}), per_step);
  cycling.fit(data, 3);
  CHECK(cycling.step() == 15);
  CHECK(cycling.optimizer().lr() == one_cycle.lr(0.05, 14));
  // torch's OneCycleLR cycles the momentum too (0.95 -> 0.85 -> 0.95 by default): stopped
  // mid-cycle, the last step ran at the schedule's momentum for step 14, not the initial 0.95.
  TrainerOptions mid_cycle = per_step;
  mid_cycle.lr_schedule = LrSchedule::parse("onecycle,max_lr=0.1,total_steps=30");
  Trainer<Net, Sgd<>> momentum_cycling(Sgd({.lr = 0.05, .momentum = 0.9}), mid_cycle);
  momentum_cycling.fit(data, 3);
  CHECK(momentum_cycling.optimizer().options().momentum == *mid_cycle.lr_schedule.momentum(14));
  CHECK(*mid_cycle.lr_schedule.momentum(14) < 0.94);
  // An optimiser without momentum is refused at construction, as torch's OneCycleLR does.
  using AdadeltaTrainer = Trainer<Net, Adadelta<>>;
  CHECK_THROWS_WITH_AS(AdadeltaTrainer(Adadelta<>{}, per_step),
                       "Trainer: the learning-rate schedule cycles the momentum, and Adadelta has none (torch's "
                       "OneCycleLR refuses it too): add cycle_momentum=0",
                       ValueError);
  per_step.lr_schedule = LrSchedule::parse("onecycle,max_lr=0.1,total_steps=15,cycle_momentum=0");
  AdadeltaTrainer adadelta(Adadelta<>{}, per_step);
  CHECK_THROWS_AS(Sgd({.lr = 0.1}).set_momentum(0.9), ValueError); // no buffer to cycle
  Adam<> adam;
  adam.set_momentum(0.85);
  CHECK(adam.options().beta1 == 0.85);
}

TEST_CASE("Trainer: gradient compression outside ProcessGroupDDP, or error feedback alone, is refused by name") {
  using Net = models::ModelC;
  TrainerOptions o{.batch_size = 8, .log = nullptr};
  o.parallel.compression = GradientCompression::bf16;
  using One = Trainer<Net, Sgd<>>;
  using Replicas = Trainer<Net, Sgd<>, ThreadedReplicas<2>>;
  CHECK_THROWS_WITH_AS(One(Sgd({.lr = 0.1}), o),
                       "Trainer: parallel.compression = bf16 under SingleDevice: gradient compression applies to "
                       "ProcessGroupDDP only (SingleDevice sums gradients in memory)",
                       ValueError);
  o.parallel.error_feedback = true;
  CHECK_THROWS_WITH_AS(Replicas(Sgd({.lr = 0.1}), o),
                       "Trainer: parallel.compression = bf16 with error_feedback under ThreadedReplicas: gradient "
                       "compression applies to ProcessGroupDDP only (ThreadedReplicas sums gradients in memory)",
                       ValueError);
  o.parallel.compression = GradientCompression::none;
  CHECK_THROWS_WITH_AS(One(Sgd({.lr = 0.1}), o),
                       "Trainer: parallel.compression = none with error_feedback under SingleDevice: gradient "
                       "compression applies to ProcessGroupDDP only (SingleDevice sums gradients in memory)",
                       ValueError);
  o.parallel.error_feedback = false;
  CHECK_NOTHROW(One(Sgd({.lr = 0.1}), o));
}
