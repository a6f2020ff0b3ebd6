// Augmentation in the Trainer (TrainerOptions::augment) and batches gathered on the prefetch
// thread on the CPU: a run with augmentation equals a run without it on the same images
// augmented by hand (per policy and precision), evaluation is not augmented, the result is the
// same for any replica count and with prefetching on or off, and a resumed run equals an
// uninterrupted one bitwise.

#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/mixed_precision.hpp>

#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;

namespace {
using test::Bands;
using test::TempDir;

constexpr ImageDims bands_dims{1, 28, 28};

Augmentation crop_and_flip() { return Augmentation{RandomCrop(28, 3), RandomHorizontalFlip()}; }

/// The bands of `base` as `aug` makes them in epoch `epoch` under `seed`: sample i augmented as
/// sample i, written out before training.
struct AugmentedBands {
  using shape = Shape<1, 28, 28>;
  std::vector<float> x;
  const Bands* base;
  AugmentedBands(const Bands& b, const Augmentation& aug, std::uint64_t seed, std::uint64_t epoch) : x(b.x), base(&b) {
    for (std::size_t i = 0; i < b.size(); ++i) aug.apply({x.data() + i * 784, 784}, bands_dims, seed, epoch, i);
  }
  std::size_t size() const { return base->size(); }
  const float* image(std::size_t i) const { return x.data() + i * 784; }
  std::int32_t label(std::size_t i) const { return base->label(i); }
};

TrainerOptions options(std::uint64_t seed, bool augment, bool prefetch = true, std::uint64_t max_steps = 0) {
  TrainerOptions o{.batch_size = 24, .seed = seed, .max_steps = max_steps, .log = nullptr, .prefetch = prefetch};
  if (augment) o.augment = crop_and_flip();
  o.parallel.deterministic = true; // (ThreadedReplicas only) bitwise across replica counts
  o.parallel.deterministic_chunks = 4;
  return o;
}

template <class T>
std::vector<float> weights(T& t) {
  return {t.parameters().values.begin(), t.parameters().values.end()};
}

/// Two epochs with augmentation in the trainer, and two epochs without it on the images
/// augmented by hand (sample index, epoch, seed): bitwise the same weights.
template <class Net, class Parallel, class Precision, class Opt>
void check_equals_augmented_by_hand(const Opt& opt, bool prefetch) {
  const Bands data(100, 1); // 5 batches per epoch, the last one short
  const std::uint64_t seed = 5;
  Trainer<Net, Opt, Parallel, Precision> with(opt, options(seed, true, prefetch));
  with.fit(data, 2);
  Trainer<Net, Opt, Parallel, Precision> by_hand(opt, options(seed, false, prefetch));
  for (std::uint64_t e = 0; e < 2; ++e) by_hand.fit_epoch(AugmentedBands(data, crop_and_flip(), seed, e));
  CHECK(weights(with) == weights(by_hand));
  // And augmentation did change the images the network saw.
  Trainer<Net, Opt, Parallel, Precision> plain(opt, options(seed, false, prefetch));
  plain.fit(data, 2);
  CHECK(weights(with) != weights(plain));
}

} // namespace

TEST_CASE("Trainer augmentation: equals training on the images augmented by hand per (seed, epoch, sample index)") {
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  SUBCASE("SingleDevice") { check_equals_augmented_by_hand<models::ModelB, SingleDevice<>, FullPrecision>(sgd, true); }
  SUBCASE("SingleDevice, no prefetch") {
    check_equals_augmented_by_hand<models::ModelB, SingleDevice<>, FullPrecision>(sgd, false);
  }
  SUBCASE("ThreadedReplicas<2>") {
    check_equals_augmented_by_hand<models::ModelB, ThreadedReplicas<2>, FullPrecision>(sgd, true);
  }
  SUBCASE("MixedPrecision<fp16>") {
    check_equals_augmented_by_hand<models::ModelC, SingleDevice<>, MixedPrecision<fp16>>(Adam({.lr = 1e-3}), true);
  }
  SUBCASE("ThreadedReplicas<2>, MixedPrecision<bf16>") {
    check_equals_augmented_by_hand<models::ModelC, ThreadedReplicas<2>, MixedPrecision<bf16>>(Adam({.lr = 1e-3}), true);
  }
}

TEST_CASE("Trainer augmentation: identical weights for 1, 2 and 4 deterministic replicas and with prefetch on or off") {
  const Bands data(96, 2);
  const Adadelta<> opt({.lr = 0.5}); // model A: dropout masks too
  auto run = [&]<class Parallel>(Parallel, bool prefetch) {
    Trainer<models::ModelA, Adadelta<>, Parallel> t(opt, options(7, true, prefetch));
    t.fit(data, 2);
    return weights(t);
  };
  const auto r1 = run(ThreadedReplicas<1>{}, true);
  CHECK(r1 == run(ThreadedReplicas<2>{}, true));
  CHECK(r1 == run(ThreadedReplicas<4>{}, false));
  CHECK(r1 == run(ThreadedReplicas<2>{}, false));
  // One device sums gradients in one pass, the deterministic replicas in 4 chunks: close.
  const auto one = run(SingleDevice<>{}, true);
  CHECK(one == run(SingleDevice<>{}, false));
  COHORT_CHECK_CLOSE_ABS(one, r1, 0.0, 1e-4, "one device vs 4 chunks, Adadelta lr 0.5, 8 steps");
}

TEST_CASE("Trainer augmentation: evaluation sees the images as they are") {
  const Bands train(48, 3), test(64, 4);
  Trainer<models::ModelB, Sgd<>> with(Sgd({.lr = 0.05}), options(2, true));
  Trainer<models::ModelB, Sgd<>> without(Sgd({.lr = 0.05}), options(2, false));
  const auto a = with.evaluate(test), b = without.evaluate(test);
  CHECK(a.loss == b.loss); // the same initial weights, the same images
  CHECK(a.accuracy == b.accuracy);
  // After training too: the trained weights in a trainer without augmentation evaluate the same.
  with.fit(train, 1);
  TempDir dir("cohort_augment_");
  with.save(dir.path / "w.safetensors");
  without.init_from(dir.path / "w.safetensors");
  const auto c = with.evaluate(test), d = without.evaluate(test);
  CHECK(c.loss == d.loss);
  CHECK(c.loss != a.loss);
}

TEST_CASE("Trainer augmentation: a resumed run equals an uninterrupted one bitwise (dropout, mid-epoch)") {
  const Bands data(100, 1);
  TempDir dir("cohort_augment_");
  const Adadelta<> opt({.lr = 0.5});
  Trainer<models::ModelA, Adadelta<>> straight(opt, options(test::train_seed, true, true, 13));
  straight.fit(data, 10);
  Trainer<models::ModelA, Adadelta<>> first(opt, options(test::train_seed, true, true, 7));
  first.fit(data, 10); // 7 steps: epoch 1, batch 2
  first.save(dir.path / "half.safetensors");
  // Another seed, no prefetching: the checkpoint's seed and epoch must key the augmentation.
  Trainer<models::ModelA, Adadelta<>> resumed(opt, options(test::resume_seed, true, false, 13));
  test::resume_checked(resumed, dir.path / "half.safetensors");
  resumed.fit(data, 10);
  CHECK(weights(resumed) == weights(straight));
}

TEST_CASE("Trainer: on the CPU the next batch is gathered and augmented on the prefetch thread") {
  const Bands data(96, 5);
  struct Seen {
    std::mutex m;
    std::set<std::thread::id> threads;
  };
  auto run = [&](bool prefetch) {
    auto seen = std::make_shared<Seen>();
    TrainerOptions o = options(1, false, prefetch);
    o.augment.add(
        [seen](std::span<float>, ImageDims, const AugmentRandom&) {
          std::lock_guard<std::mutex> g(seen->m);
          seen->threads.insert(std::this_thread::get_id());
        },
        "thread recorder");
    Trainer<models::ModelB, Sgd<>> t(Sgd({.lr = 0.01}), o);
    t.fit(data, 1);
    return seen->threads;
  };
  const auto on = run(true), off = run(false);
  CHECK(off == std::set<std::thread::id>{std::this_thread::get_id()});
  CHECK(on.size() == 2); // this thread (each epoch's first batch) and the prefetcher (the rest)
  CHECK(on.count(std::this_thread::get_id()) == 1);
}

namespace {
// Flat samples: a dataset stating a shape type at namespace scope (a local class's unused-looking
// `using shape` trips -Wunused-local-typedefs although the data seam reads it).
struct FlatBands {
  using shape = Shape<784>;
  Bands b{24, 1};
  std::size_t size() const { return b.size(); }
  const float* image(std::size_t i) const { return b.image(i); }
  std::int32_t label(std::size_t i) const { return b.label(i); }
};
} // namespace

TEST_CASE("Trainer augmentation: a network without image input refuses it with a ShapeError") {
  using Flat = Sequential<Input<784>, Linear<784, 10>>;
  FlatBands data;
  Trainer<Flat, Sgd<>> t(Sgd({.lr = 0.01}), options(1, true));
  CHECK_THROWS_WITH_AS(t.fit(data, 1), doctest::Contains("augmentation transforms images (C, H, W)"), ShapeError);
}
