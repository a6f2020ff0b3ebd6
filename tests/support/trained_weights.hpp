#pragma once
// What the trainer tests compare: the weights after some steps of a Trainer on the toy bands
// (batches of 24, seed 5), optionally saving a checkpoint at the end or resuming from one, and
// a scratch directory for those checkpoints.
//
// max_steps is absolute, so a resume that loaded nothing would train `steps` steps from the same
// seed and match the straight run bit for bit. A resumed run therefore starts from another seed
// (the checkpoint restores the seed), and its position right after loading must be the file's.

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/cohort.hpp>

#include "support/bands.hpp"
#include "support/temp_dir.hpp"

namespace cohort::test {

/// The seed of the runs that train from scratch, and the one a resumed run is built with: the
/// checkpoint must replace it.
inline constexpr std::uint64_t train_seed = 5;
inline constexpr std::uint64_t resume_seed = 1005;

/// Where a checkpoint says training stood (its trainer metadata), and the fp16 loss scale (0:
/// none recorded).
struct CheckpointPosition {
  std::uint64_t step = 0, epoch = 0;
  double loss_scale = 0;
};
inline CheckpointPosition checkpoint_position(const std::filesystem::path& path) {
  const auto f = SafetensorsFile::read(path);
  const auto& m = f.metadata();
  const auto scale = m.find("cohort.scaler.scale");
  return {std::stoull(m.at("cohort.trainer.step")), std::stoull(m.at("cohort.trainer.epoch")),
          scale == m.end() ? 0.0 : std::stod(scale->second)};
}

/// Resumes `t` (built with resume_seed) from `path` and CHECKs that the position it reports
/// right away (and the fp16 loss scale, if the file has one) is the checkpoint's: a resume that
/// loads nothing stays at step 0 with the initial scale.
template <class T>
void resume_checked(T& t, const std::filesystem::path& path) {
  const CheckpointPosition want = checkpoint_position(path);
  REQUIRE(want.step > 0); // a checkpoint of an untrained run would prove nothing
  t.resume(path);
  CHECK(t.step() == want.step);
  CHECK(t.epoch() == want.epoch);
  if (want.loss_scale > 0) CHECK(t.engine().loss_scale() == want.loss_scale);
}

/// The weights after `steps` optimiser steps (up to 10 epochs of `data`) of Trainer<Net, Opt,
/// Policy>; `resume` first loads a checkpoint (into a trainer seeded with resume_seed, checked by
/// resume_checked), `save` writes one at the end.
template <class Net, class Policy, class Opt>
std::vector<float> trained_weights(Opt opt, const Bands& data, std::uint64_t steps,
                                   const std::filesystem::path& save = {}, const std::filesystem::path& resume = {},
                                   bool prefetch = true) {
  Trainer<Net, Opt, Policy> t(std::move(opt), {.batch_size = 24,
                                               .seed = resume.empty() ? train_seed : resume_seed,
                                               .max_steps = steps,
                                               .log = nullptr,
                                               .prefetch = prefetch});
  if (!resume.empty()) resume_checked(t, resume);
  t.fit(data, 10);
  if (!save.empty()) t.save(save);
  return {t.parameters().values.begin(), t.parameters().values.end()};
}

} // namespace cohort::test
