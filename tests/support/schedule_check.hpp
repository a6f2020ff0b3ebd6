#pragma once
// A learning-rate schedule reaches the optimiser wherever it runs: a scheduled run of
// Trainer<ModelB, Sgd, Policy, Precision> equals the same rates set by hand (Trainer::set_lr)
// before each epoch, bitwise, and differs from the unscheduled run. Shared by the CPU trainer
// tests and the device trainer cases.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <cohort/models/seed_models.hpp>
#include <cohort/optim/sgd.hpp>
#include <cohort/train/trainer.hpp>

#include "support/bands.hpp"

namespace cohort::test {

template <class Policy, class Precision>
void check_schedule_by_hand() {
  using T = Trainer<models::ModelB, Sgd<>, Policy, Precision>; // BatchNorm, momentum: the rate enters the state
  const Bands data(100, 1);                                    // 5 steps per epoch at batch 24
  const LrSchedule schedule = LrSchedule::parse("multistep,milestones=1/2,gamma=0.3");
  const TrainerOptions plain{.batch_size = 24, .seed = 5, .log = nullptr};
  TrainerOptions with_schedule = plain;
  with_schedule.lr_schedule = schedule;
  const auto weights = [](T& t) {
    return std::vector<float>(t.parameters().values.begin(), t.parameters().values.end());
  };
  T scheduled(Sgd({.lr = 0.05, .momentum = 0.9}), with_schedule);
  scheduled.fit(data, 3);
  T by_hand(Sgd({.lr = 0.05, .momentum = 0.9}), plain);
  for (std::uint64_t e = 0; e < 3; ++e) {
    by_hand.set_lr(schedule.lr(0.05, e));
    by_hand.fit_epoch(data);
  }
  CHECK(weights(scheduled) == weights(by_hand)); // bitwise
  T unscheduled(Sgd({.lr = 0.05, .momentum = 0.9}), plain);
  unscheduled.fit(data, 3);
  CHECK(weights(unscheduled) != weights(scheduled)); // the rate did reach the optimiser
}

} // namespace cohort::test
