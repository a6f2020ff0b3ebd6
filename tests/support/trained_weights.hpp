#pragma once
// What the trainer tests compare: the weights after some steps of a Trainer on the toy bands
// (batches of 24, seed 5), optionally saving a checkpoint at the end or resuming from one, and
// a scratch directory for those checkpoints.

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>

#include "support/bands.hpp"

namespace cohort::test {

/// A fresh directory under the system's temporary one, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(std::random_device{}()))) {
    std::filesystem::create_directories(path);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// The weights after `steps` optimiser steps (up to 10 epochs of `data`) of Trainer<Net, Opt,
/// Policy>; `resume` first loads a checkpoint, `save` writes one at the end.
template <class Net, class Policy, class Opt>
std::vector<float> trained_weights(Opt opt, const Bands& data, std::uint64_t steps,
                                   const std::filesystem::path& save = {}, const std::filesystem::path& resume = {},
                                   bool prefetch = true) {
  Trainer<Net, Opt, Policy> t(std::move(opt),
                              {.batch_size = 24, .seed = 5, .max_steps = steps, .log = nullptr, .prefetch = prefetch});
  if (!resume.empty()) t.resume(resume);
  t.fit(data, 10);
  if (!save.empty()) t.save(save);
  return {t.parameters().values.begin(), t.parameters().values.end()};
}

} // namespace cohort::test
