// ThreadedReplicas: equivalence with one device on the whole batch, bitwise invariance across
// replica counts in deterministic mode, DDP's BatchNorm semantics, gradient accumulation, and
// checkpoints shared with other policies.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/train/trainer.hpp>

#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/engine_harness.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

using test::Bands;
using test::EngineOf;
using test::relative_difference;

/// `steps` optimiser steps on consecutive batches of `batch` samples, `micro` micro-batches each.
template <class Engine>
void train(Engine& e, const Bands& data, std::size_t batch, std::size_t steps, std::size_t micro = 1) {
  std::uint64_t forward = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    const std::size_t per = batch / micro;
    for (std::size_t i = 0; i < micro; ++i, ++forward) {
      const std::size_t first = (s * batch + i * per) % (data.size() - per + 1);
      e.step({data.image(first), per}, std::span<const std::int32_t>(data.y.data() + first, per),
             {.step = s, .forward_pass = forward, .index = i, .count = micro});
    }
  }
}

EngineOptions options(bool deterministic = false) {
  EngineOptions o{.seed = 3};
  o.parallel.deterministic = deterministic;
  o.parallel.deterministic_chunks = 4;
  return o;
}

} // namespace

// Replicas against one device: 1e-6 of each tensor's largest magnitude (tensor by tensor,
// compare.hpp). Measured at most 1.5e-7 (model C's 4.weight, SGD), so a margin of 6x.
TEST_CASE("ThreadedReplicas: 2 replicas x half a batch == one device x the batch (1e-6, model C, SGD momentum)") {
  const Bands data(256, 1);
  const Sgd opt({.lr = 0.05, .momentum = 0.9});
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> one(opt, options());
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>> two(opt, options());
  CHECK(test::engine_values(one) == test::engine_values(two)); // the same initialisation
  train(one, data, 64, 4);
  train(two, data, 64, 4);
  const auto a = test::engine_values(two), b = test::engine_values(one);
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, a, b, 1e-6, "2 replicas vs one device");
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> untrained(opt, options());
  CHECK(relative_difference(a, test::engine_values(untrained)) > 1e-3); // training moved the weights
}

TEST_CASE("ThreadedReplicas: uneven shards are weighted by size (5 samples on 2 and 3 replicas)") {
  const Bands data(64, 2);
  const Sgd opt({.lr = 0.1});
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> one(opt, options());
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>> two(opt, options());
  EngineOf<ThreadedReplicas<3>, models::ModelC, Sgd<>> three(opt, options());
  train(one, data, 5, 3);
  train(two, data, 5, 3);
  train(three, data, 5, 3);
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(two), test::engine_values(one), 1e-6,
                             "2 replicas vs one device");
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(three), test::engine_values(one), 1e-6,
                             "3 replicas vs one device");
  // Fewer samples than replicas: the idle replica adds nothing.
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> one_b(opt, options());
  EngineOf<ThreadedReplicas<3>, models::ModelC, Sgd<>> three_b(opt, options());
  train(one_b, data, 2, 2);
  train(three_b, data, 2, 2);
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(three_b), test::engine_values(one_b), 1e-6,
                             "3 replicas (one idle) vs one");
}

TEST_CASE("ThreadedReplicas: deterministic mode gives bitwise the same weights for 1, 2 and 4 replicas") {
  const Bands data(256, 3);
  SUBCASE("model C, Adam") {
    const Adam opt({.lr = 1e-3});
    EngineOf<ThreadedReplicas<1>, models::ModelC, Adam<>> r1(opt, options(true));
    EngineOf<ThreadedReplicas<2>, models::ModelC, Adam<>> r2(opt, options(true));
    EngineOf<ThreadedReplicas<4>, models::ModelC, Adam<>> r4(opt, options(true));
    train(r1, data, 48, 3);
    train(r2, data, 48, 3);
    train(r4, data, 48, 3);
    CHECK(test::engine_values(r1) == test::engine_values(r2));
    CHECK(test::engine_values(r1) == test::engine_values(r4));
    // The chunked sum is not the one-pass sum: close, not equal. After Adam steps the unit is
    // the step size, not a tensor's scale (Adam divides each gradient entry by its own running
    // magnitude, so a tiny entry with a rounding difference moves its weight by up to lr; see
    // tests/models/seed_models.cpp): every weight within 0.05 lr (measured 0.016 lr, model C's
    // 4.weight after 3 steps).
    EngineOf<SingleDevice<>, models::ModelC, Adam<>> one(opt, options());
    train(one, data, 48, 3);
    COHORT_CHECK_CLOSE_ABS(test::engine_values(r1), test::engine_values(one), 0.0, 0.05 * 1e-3,
                           "4 chunks vs one pass, in units of lr");
  }
  SUBCASE("model A: dropout masks follow the global sample, not the replica") {
    const Adadelta opt({.lr = 0.5});
    EngineOf<ThreadedReplicas<1>, models::ModelA, Adadelta<>> r1(opt, options(true));
    EngineOf<ThreadedReplicas<4>, models::ModelA, Adadelta<>> r4(opt, options(true));
    train(r1, data, 32, 2);
    train(r4, data, 32, 2);
    CHECK(test::engine_values(r1) == test::engine_values(r4));
  }
  SUBCASE("model B: per-chunk BatchNorm statistics, running statistics from chunk 0") {
    const Sgd opt({.lr = 0.01, .momentum = 0.9});
    EngineOf<ThreadedReplicas<1>, models::ModelB, Sgd<>> r1(opt, options(true));
    EngineOf<ThreadedReplicas<2>, models::ModelB, Sgd<>> r2(opt, options(true));
    train(r1, data, 40, 2);
    train(r2, data, 40, 2);
    CHECK(test::engine_values(r1) == test::engine_values(r2));
    CHECK(std::equal(r1.parameters().buffers.begin(), r1.parameters().buffers.end(), r2.parameters().buffers.begin()));
  }
}

TEST_CASE("ThreadedReplicas: BatchNorm uses each replica's batch, running statistics come from replica 0") {
  const Bands data(64, 4);
  EngineOf<ThreadedReplicas<2>, models::ModelB, Sgd<>> two(Sgd({.lr = 0.0}), options());
  train(two, data, 20, 1); // lr 0: only the running statistics move
  // Replica 0 had samples 0..9: one training forward of those on a fresh network gives the
  // same running statistics, bit for bit.
  Network<models::ModelB> ref(3);
  ref.forward(ConstBatchView<Shape<1, 28, 28>, float>(data.image(0), 10));
  CHECK(std::equal(ref.parameters().buffers.begin(), ref.parameters().buffers.end(), two.parameters().buffers.begin()));
  CHECK(ref.parameters().counters[0] == 1);
  Network<models::ModelB> all(3); // the whole batch would give other statistics
  all.forward(ConstBatchView<Shape<1, 28, 28>, float>(data.image(0), 20));
  CHECK_FALSE(
      std::equal(all.parameters().buffers.begin(), all.parameters().buffers.end(), two.parameters().buffers.begin()));
}

TEST_CASE("Gradient accumulation: 4 micro-batches of 16 == one batch of 64 (1e-6), for 1 and 2 replicas") {
  const Bands data(256, 5);
  const Sgd opt({.lr = 0.05, .momentum = 0.5});
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> whole(opt, options());
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>> micro(opt, options());
  EngineOf<ThreadedReplicas<2>, models::ModelC, Sgd<>> micro2(opt, options());
  train(whole, data, 64, 3);
  train(micro, data, 64, 3, 4);
  train(micro2, data, 64, 3, 4);
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(micro), test::engine_values(whole), 1e-6,
                             "4 micro-batches vs one batch");
  COHORT_CHECK_TENSORS_CLOSE(models::ModelC, test::engine_values(micro2), test::engine_values(whole), 1e-6,
                             "4 micro-batches on 2 replicas vs one batch");
}

TEST_CASE("ThreadedReplicas: the Trainer trains, reports 2 devices, and its checkpoint resumes on one device") {
  const Bands train_set(240, 6), test_set(100, 7);
  const fs::path dir = fs::temp_directory_path() / ("cohort_replicas_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  TrainerOptions o{.batch_size = 40, .seed = 2, .log = nullptr, .metrics = dir / "m.jsonl"};
  o.parallel.threads_per_replica = 1;
  Trainer<models::ModelC, Adam<>, ThreadedReplicas<2>> t(Adam({.lr = 2e-3}), o);
  const auto history = t.fit(train_set, 3, &test_set);
  REQUIRE(history.size() == 3);
  CHECK(*history.back().test_accuracy > 90.0);
  std::ifstream metrics(dir / "m.jsonl");
  std::string line;
  std::getline(metrics, line);
  CHECK(line.find("\"n_devices\": 2") != std::string::npos);
  CHECK(line.find("\"parallel\": \"ThreadedReplicas\"") != std::string::npos);
  t.save(dir / "ckpt.safetensors");
  // Another seed: only the checkpoint can make the weights and the position equal.
  Trainer<models::ModelC, Adam<>> single(Adam({.lr = 2e-3}),
                                         {.batch_size = 40, .seed = test::resume_seed, .log = nullptr});
  test::resume_checked(single, dir / "ckpt.safetensors");
  CHECK(
      std::equal(single.parameters().values.begin(), single.parameters().values.end(), t.parameters().values.begin()));
  CHECK(single.epoch() == 3);
  CHECK(single.step() == t.step());
  CHECK(single.optimizer().steps() == t.optimizer().steps());
  fs::remove_all(dir);
}

TEST_CASE("ThreadedReplicas: resuming is bitwise exact (2 replicas, BatchNorm statistics, SGD momentum)") {
  const Bands data(100, 1); // 5 batches per epoch (the last one short): the resume crosses an epoch
  test::TempDir dir("cohort_replicas_");
  using P = ThreadedReplicas<2>;
  const Sgd<> opt({.lr = 0.05, .momentum = 0.9});
  const auto straight = test::trained_weights<models::ModelB, P>(opt, data, 9);
  test::trained_weights<models::ModelB, P>(opt, data, 4, dir.path / "half.safetensors");
  // Resumed into a trainer of another seed, position checked right after loading.
  const auto resumed = test::trained_weights<models::ModelB, P>(opt, data, 9, {}, dir.path / "half.safetensors");
  CHECK(straight == resumed); // bitwise
}

TEST_CASE("ThreadedReplicas: deterministic mode needs a chunk count the replicas divide") {
  EngineOptions o = options(true);
  o.parallel.deterministic_chunks = 6;
  CHECK_THROWS_WITH_AS((EngineOf<ThreadedReplicas<4>, models::ModelC, Sgd<>>(Sgd({.lr = 0.1}), o)),
                       doctest::Contains("must be a positive multiple of the replica count (4)"), ValueError);
}

TEST_CASE("ThreadedReplicas: the Trainer shares its threads among the replicas unless told otherwise") {
  const auto per_replica = [](std::size_t threads, std::size_t replicas, std::size_t asked) {
    TrainerOptions o{.threads = threads, .log = nullptr};
    o.parallel.replicas = replicas;
    o.parallel.threads_per_replica = asked;
    Trainer<models::ModelA, Sgd<>, ThreadedReplicas<dynamic_replicas>> t(Sgd({.lr = 0.1}), o);
    return t.threads().threads;
  };
  CHECK(per_replica(4, 2, 0) == 2);
  CHECK(per_replica(4, 1, 0) == 4); // one replica takes every thread (it used to take one)
  CHECK(per_replica(3, 2, 0) == 1); // rounded down, never oversubscribed
  CHECK(per_replica(1, 4, 0) == 1); // at least one each
  CHECK(per_replica(4, 2, 3) == 3); // an explicit count is kept
  TrainerOptions o{.threads = 4, .log = nullptr};
  Trainer<models::ModelA, Sgd<>, ThreadedReplicas<2>> fixed(Sgd({.lr = 0.1}), o);
  CHECK(fixed.threads().threads == 2);
}
