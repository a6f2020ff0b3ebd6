#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/optimizer_state.hpp"

#include <cohort/optim/adadelta.hpp>
#include <cohort/optim/adam.hpp>
#include <cohort/optim/sgd.hpp>

using namespace cohort;
using namespace cohort::test;

static_assert(Optimizer<Sgd<float>> && Optimizer<Adam<float>> && Optimizer<Adadelta<float>>);

namespace {
// Optimiser updates are a handful of float operations per element: 1e-6 of each tensor's largest
// value, parameters and state alike (measured at most 3.4e-7: Adadelta's acc_delta after step 1).
constexpr double optim_rtol = 1e-6;

template <class Opt>
void check_steps(Opt opt, const std::string& name) {
  const auto f = fixture("optim_" + name);
  auto p = f.values<float>("p0");
  for (int s = 1; s <= 3; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    opt.step(std::span<float>(p), std::span<const float>(g));
    COHORT_CHECK_CLOSE(std::span<const float>(p), std::span<const float>(f.values<float>("p" + std::to_string(s))),
                       optim_rtol, at);
    // The state carried to the next step is torch's, slot by slot, under torch's names.
    check_optimizer_state(
        f, s, opt.slots(p.size()), [](const auto& slot) { return std::span<const float>(slot.values); }, optim_rtol,
        at);
    if (f.find("state" + std::to_string(s) + ".step"))
      CHECK(opt.steps() == std::uint64_t(f.values<std::int64_t>("state" + std::to_string(s) + ".step")[0]));
  }
  CHECK(opt.steps() == 3);
}
} // namespace

TEST_CASE("SGD: matches torch.optim.SGD over 3 steps") {
  check_steps(Sgd({.lr = 0.1}), "sgd_plain");
  check_steps(Sgd({.lr = 0.1, .momentum = 0.9}), "sgd_momentum");
  check_steps(Sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}), "sgd_dampening_wd");
  check_steps(Sgd({.lr = 0.1, .dampening = 0.5, .weight_decay = 0.01}), "sgd_dampening_no_momentum");
  check_steps(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true}), "sgd_nesterov");
}
TEST_CASE("Adam: matches torch.optim.Adam over 3 steps, AMSGrad and weight decay included") {
  check_steps(Adam({.lr = 1e-3}), "adam_default");
  check_steps(Adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.1, .amsgrad = true}),
              "adam_amsgrad_wd");
}
TEST_CASE("Adadelta: matches torch.optim.Adadelta over 3 steps") {
  check_steps(Adadelta(), "adadelta_default");
  check_steps(Adadelta({.lr = 0.5, .rho = 0.95, .eps = 1e-5, .weight_decay = 0.05}), "adadelta_custom");
}

TEST_CASE("Optimisers: defaults are PyTorch's") {
  CHECK(SgdOptions{}.lr == 1e-3);
  CHECK(AdamOptions{}.beta1 == 0.9);
  CHECK(AdamOptions{}.beta2 == 0.999);
  CHECK(AdamOptions{}.eps == 1e-8);
  CHECK(AdadeltaOptions{}.lr == 1.0);
  CHECK(AdadeltaOptions{}.rho == 0.9);
  CHECK(AdadeltaOptions{}.eps == 1e-6);
}

TEST_CASE("Optimisers: invalid hyperparameters are typed errors") {
  CHECK_THROWS_WITH_AS(Sgd({.lr = -1}), "SGD: invalid lr: -1 (expected >= 0)", ValueError);
  CHECK_THROWS_AS(Sgd({.lr = 0.1, .nesterov = true}), ValueError); // nesterov needs momentum
  CHECK_THROWS_AS(Sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .nesterov = true}), ValueError);
  CHECK_THROWS_AS(Adam({.beta1 = 1.0}), ValueError);
  CHECK_THROWS_AS(Adam({.eps = -1}), ValueError);
  CHECK_THROWS_AS(Adadelta({.rho = 1.5}), ValueError);
  Adam<float> opt;
  std::vector<float> p(4), g(3);
  CHECK_THROWS_AS(opt.step(std::span<float>(p), std::span<const float>(g)), ShapeError);
}
