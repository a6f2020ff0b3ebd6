// Lookahead (optim/lookahead.hpp) against the paper's Algorithm 1 run in torch (fixtures
// lookahead_sgd, lookahead_adam: tests/reference/make_reference.py): parameters, the base
// optimiser's state and the slow weights after each of 7 steps, over two synchronisations and
// both of torch.lerp's branches; the argument checks; and a Trainer whose checkpoint carries the
// slow weights, resumed into a trainer built with another seed, bit for bit.

#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/optim/lookahead.hpp>
#include <cohort/optim/optimizer_variant.hpp>

#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/optimizer_state.hpp"
#include "support/temp_dir.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
using namespace cohort::test;

static_assert(Optimizer<Lookahead<Sgd<>>> && Optimizer<Lookahead<Adam<>>>);
static_assert(Lookahead<Sgd<>>::name == std::string_view("Lookahead(SGD)"));
static_assert(Lookahead<Adam<>>::name == std::string_view("Lookahead(Adam)"));

namespace {
// As tests/optim/optimizers.cpp: a handful of float operations per element (the slow weights'
// lerp is one fused multiply-add more), 1e-6 of each tensor's largest value.
constexpr double lookahead_rtol = 1e-6;

template <class Opt>
void check_lookahead_against_torch(Opt opt, const std::string& name) {
  const auto f = fixture("lookahead_" + name);
  auto p = f.values<float>("p0");
  for (int s = 1; s <= 7; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    opt.step(std::span<float>(p), std::span<const float>(g));
    COHORT_CHECK_CLOSE(std::span<const float>(p), std::span<const float>(f.values<float>("p" + std::to_string(s))),
                       lookahead_rtol, at);
    check_optimizer_state(
        f, s, opt.slots(p.size()), [](const auto& slot) { return std::span<const float>(slot.values); }, lookahead_rtol,
        at);
  }
  CHECK(opt.steps() == 7);
}

using LookaheadNet = models::ModelB; // BatchNorm: the running statistics stay out of Lookahead
constexpr std::size_t lookahead_batch = 20;
TrainerOptions lookahead_options(std::uint64_t seed) {
  return {.batch_size = lookahead_batch, .seed = seed, .log = nullptr};
}
Lookahead<Sgd<>> trainer_lookahead() { return Lookahead(Sgd({.lr = 0.05, .momentum = 0.9}), {.k = 3, .alpha = 0.5}); }

bool same_weights(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}
} // namespace

TEST_CASE(
    "Lookahead: the paper's Algorithm 1 as torch runs it, around SGD (k 3, alpha 0.5) and Adam (k 2, alpha 0.8)") {
  check_lookahead_against_torch(Lookahead(Sgd({.lr = 0.1, .momentum = 0.9}), {.k = 3, .alpha = 0.5}), "sgd");
  check_lookahead_against_torch(Lookahead(Adam({.lr = 0.01}), {.k = 2, .alpha = 0.8}), "adam");
}

TEST_CASE("Lookahead: k = 0 and alpha outside [0, 1] are ValueErrors naming the value") {
  CHECK_THROWS_WITH_AS(Lookahead(Sgd({.lr = 0.1}), {.k = 0}), doctest::Contains("Lookahead: invalid k: 0"), ValueError);
  CHECK_THROWS_WITH_AS(Lookahead(Sgd({.lr = 0.1}), {.alpha = 1.5}),
                       doctest::Contains("Lookahead: invalid alpha: 1.5 (expected 0 <= alpha <= 1)"), ValueError);
  // A parameter array of another size than the slow weights' is a ShapeError, not a silent lerp.
  Lookahead<Sgd<>> opt(Sgd({.lr = 0.1}));
  std::vector<float> p(5, 1.f), g(5, 0.5f), q(4, 1.f), h(4, 0.5f);
  opt.step(std::span<float>(p), std::span<const float>(g));
  CHECK_THROWS_WITH_AS(opt.step(std::span<float>(q), std::span<const float>(h)),
                       doctest::Contains("slow weights were built for 5 parameters, step() got 4"), ShapeError);
}

TEST_CASE("Lookahead in a Trainer: the fast weights are the slow ones after every k-th step, and a resume is exact") {
  TempDir dir;
  const Bands data(lookahead_batch, 1); // one step per epoch
  Trainer<LookaheadNet, Lookahead<Sgd<>>> straight(trainer_lookahead(), lookahead_options(train_seed));
  straight.fit(data, 6);
  // Right after a synchronisation (step 6) the network's weights are the slow weights.
  CHECK(same_weights(straight.parameters().values.span(), straight.optimizer().slow_weights()));
  straight.fit(data, 8);
  CHECK_FALSE(same_weights(straight.parameters().values.span(), straight.optimizer().slow_weights()));
  // Without Lookahead the same run ends elsewhere: the synchronisations change the weights.
  Trainer<LookaheadNet, Sgd<>> plain(Sgd({.lr = 0.05, .momentum = 0.9}), lookahead_options(train_seed));
  plain.fit(data, 8);
  CHECK_FALSE(same_weights(plain.parameters().values.span(), straight.parameters().values.span()));

  Trainer<LookaheadNet, Lookahead<Sgd<>>> first(trainer_lookahead(), lookahead_options(train_seed));
  first.fit(data, 5); // between synchronisations: slow and fast weights differ
  first.save(dir.path / "ckpt.safetensors");
  Trainer<LookaheadNet, Lookahead<Sgd<>>> second(trainer_lookahead(), lookahead_options(resume_seed));
  second.resume(dir.path / "ckpt.safetensors");
  CHECK(same_weights(second.optimizer().slow_weights(), first.optimizer().slow_weights()));
  second.fit(data, 8);
  CHECK(same_weights(second.parameters().values.span(), straight.parameters().values.span()));
  CHECK(same_weights(second.optimizer().slow_weights(), straight.optimizer().slow_weights()));

  // A checkpoint of plain SGD does not resume into Lookahead(SGD), nor the other way round.
  plain.save(dir.path / "sgd.safetensors");
  Trainer<LookaheadNet, Lookahead<Sgd<>>> other(trainer_lookahead(), lookahead_options(resume_seed));
  CHECK_THROWS_WITH_AS(other.resume(dir.path / "sgd.safetensors"),
                       doctest::Contains("the file was written by SGD, this run uses Lookahead(SGD)"), CheckpointError);
}

TEST_CASE("Lookahead: chosen at run time as an OptimizerVariant alternative, it trains as when held directly") {
  const Bands data(lookahead_batch, 1);
  using AnyOpt = OptimizerVariant<Sgd<>, Lookahead<Sgd<>>>;
  Trainer<LookaheadNet, AnyOpt> chosen(AnyOpt(trainer_lookahead()), lookahead_options(train_seed));
  chosen.fit(data, 7);
  Trainer<LookaheadNet, Lookahead<Sgd<>>> direct(trainer_lookahead(), lookahead_options(train_seed));
  direct.fit(data, 7);
  CHECK(same_weights(chosen.parameters().values.span(), direct.parameters().values.span()));
  CHECK(chosen.optimizer().name() == "Lookahead(SGD)");
}
