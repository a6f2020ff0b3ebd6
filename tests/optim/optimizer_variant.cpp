// OptimizerVariant: a run-time choice among optimisers steps exactly like the held optimiser,
// and its checkpoints are the held optimiser's (they resume into it, directly or in a variant).

#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/optim/optimizer_variant.hpp>

#include "support/bands.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using AnyOpt = OptimizerVariant<Sgd<>, Adam<>, Adadelta<>>;

/// Parameters after `steps` steps of `opt` with random gradients (the same for every optimiser).
template <class Opt>
std::vector<float> after_steps(Opt& opt, int steps) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> p(1000), g(p.size());
  for (float& v : p) v = normal(rng);
  for (int s = 0; s < steps; ++s) {
    for (float& v : g) v = normal(rng);
    opt.step(std::span<float>(p), std::span<const float>(g));
  }
  return p;
}

template <class O>
void check_same_as_held(O direct) {
  AnyOpt variant(direct);
  const auto expected = after_steps(direct, 3);
  const auto got = after_steps(variant, 3);
  CHECK(got == expected); // bitwise
  CHECK(variant.steps() == 3);
  CHECK(variant.name() == O::name);
  CHECK(optimizer_name(variant) == optimizer_name(direct));
  REQUIRE(variant.template get_if<O>() != nullptr);
  const auto a = variant.slots(), b = direct.slots();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].name == b[i].name);
    CHECK(std::equal(a[i].values.begin(), a[i].values.end(), b[i].values.begin()));
  }
}
} // namespace

TEST_CASE("OptimizerVariant: steps exactly like the optimiser it holds") {
  check_same_as_held(Sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true}));
  check_same_as_held(Adam({.lr = 1e-3, .eps = 1e-7, .weight_decay = 0.01}));
  check_same_as_held(Adadelta({.lr = 0.5}));
  AnyOpt v(Sgd({.lr = 0.1}));
  CHECK(v.get_if<Adam<>>() == nullptr);
  CHECK(v.slots().empty()); // plain SGD has no state
}

TEST_CASE("OptimizerVariant: checkpoints resume into the held optimiser, and only into it") {
  const test::Bands data(100, 1);
  test::TempDir dir("cohort_variant_");
  const TrainerOptions o{.batch_size = 24, .seed = 3, .max_steps = 8, .log = nullptr};
  const TrainerOptions half{.batch_size = 24, .seed = 3, .max_steps = 4, .log = nullptr};
  const Adam<> adam({.lr = 1e-3, .eps = 1e-7});

  Trainer<models::ModelC, Adam<>> straight(adam, o);
  straight.fit(data, 10);

  // Half the steps in a variant, the rest with Adam held directly: the same bits.
  Trainer<models::ModelC, AnyOpt> first(AnyOpt(adam), half);
  first.fit(data, 10);
  first.save(dir.path / "half.safetensors");
  // Built with another seed: the checkpoint must restore it and the position.
  TrainerOptions other_seed = o;
  other_seed.seed = test::resume_seed;
  Trainer<models::ModelC, Adam<>> second(adam, other_seed);
  test::resume_checked(second, dir.path / "half.safetensors");
  second.fit(data, 10);
  CHECK(std::equal(straight.parameters().values.begin(), straight.parameters().values.end(),
                   second.parameters().values.begin()));
  CHECK(second.optimizer().steps() == 8);

  // A variant holding another optimiser refuses the file, naming both.
  Trainer<models::ModelC, AnyOpt> sgd(AnyOpt(Sgd({.lr = 0.1})), o);
  CHECK_THROWS_WITH_AS(sgd.resume(dir.path / "half.safetensors"),
                       doctest::Contains("optimizer: the file was written by Adam, this run uses SGD"),
                       CheckpointError);
}
