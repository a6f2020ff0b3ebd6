#pragma once
// The optimisers on the device backend `Dev` (chosen by the including file): their element rules
// run as device kernels over state in device memory, and must step like torch.optim (parameters
// and state) and like the CPU's.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/device_harness.hpp"
#include "support/optimizer_state.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
template <class HostOpt, class DevOpt>
void check_steps_like_cpu(HostOpt host, DevOpt dev, const char* what) {
  INFO(what);
  constexpr std::size_t n = 1003; // not a multiple of any vector width
  auto p = random_values(n, 1);
  DeviceBuffer<float> pd, gd;
  pd.assign_from_host(p.data(), n);
  for (int s = 0; s < 4; ++s) {
    const auto g = random_values(n, 10 + std::uint64_t(s));
    gd.assign_from_host(g.data(), n);
    host.step(std::span<float>(p), std::span<const float>(g));
    dev.step(std::span<float>(pd.data(), n), std::span<const float>(gd.data(), n));
  }
  CHECK(dev.steps() == host.steps());
  // The same operations in the same order: equal on the CPU's OpenMP system, within float
  // rounding where the device contracts multiply-adds (nvcc).
  COHORT_CHECK_CLOSE(pd.to_host(), p, 1e-6, "parameters");
  const auto hs = host.slots(n);
  const auto ds = dev.slots(n);
  REQUIRE(hs.size() == ds.size());
  for (std::size_t i = 0; i < hs.size(); ++i) {
    CHECK(hs[i].name == ds[i].name);
    COHORT_CHECK_CLOSE(copy_to_host(ds[i].values.data(), n), std::span<const float>(hs[i].values), 1e-6, hs[i].name);
  }
}
/// torch.optim's 3 steps (tests/reference/ optimiser fixtures) on the device: the parameters and,
/// after every step, the state slots under torch's names (optimizers.cpp does the same on the CPU).
template <class DevOpt>
void check_fixture_steps(DevOpt opt, const std::string& name) {
  const auto f = fixture("optim_" + name);
  const auto p0 = f.values<float>("p0");
  const std::size_t n = p0.size();
  DeviceBuffer<float> pd, gd;
  pd.assign_from_host(p0.data(), n);
  for (int s = 1; s <= 3; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    gd.assign_from_host(g.data(), n);
    opt.step(std::span<float>(pd.data(), n), std::span<const float>(gd.data(), n));
    // 1e-6 of each tensor's largest value, as the CPU optimisers (measured at most 3.4e-7 on
    // ThrustDevice: Adadelta's acc_delta after step 1).
    COHORT_CHECK_CLOSE(pd.to_host(), f.values<float>("p" + std::to_string(s)), 1e-6, at);
    check_optimizer_state(
        f, s, opt.slots(n), [n](const auto& slot) { return copy_to_host(slot.values.data(), n); }, 1e-6, at);
  }
  CHECK(opt.steps() == 3);
}
/// torch's param_groups and clip_grad_norm_ (the "*_groups_clip" fixtures; optimizers.cpp says
/// how they are cut) on the device: the norm is the device's reduction, the update its kernels.
template <class DevOpt>
void check_fixture_groups_and_clipping(DevOpt opt, const std::string& name, double lr_scale, double max_norm) {
  const auto f = fixture("optim_" + name);
  opt.set_parameter_groups({{0, 20, {}}, {20, 10, {.lr_scale = lr_scale, .weight_decay = 0.0}}, {30, 7, {}}});
  opt.set_max_grad_norm(max_norm);
  const auto p0 = f.values<float>("p0");
  const std::size_t n = p0.size();
  DeviceBuffer<float> pd, gd;
  pd.assign_from_host(p0.data(), n);
  for (int s = 1; s <= 3; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    gd.assign_from_host(g.data(), n);
    opt.step(std::span<float>(pd.data(), n), std::span<const float>(gd.data(), n));
    CHECK_MESSAGE(opt.last_grad_norm() ==
                      doctest::Approx(f.values<double>("norm" + std::to_string(s))[0]).epsilon(1e-6),
                  at); // as on the CPU (measured 5.6e-8)
    COHORT_CHECK_CLOSE(pd.to_host(), f.values<float>("p" + std::to_string(s)), 1e-6, at);
  }
}
} // namespace

TEST_CASE("device optimisers: AdamW and RMSprop match torch.optim over 3 steps, state included") {
  check_fixture_steps(AdamW<float, Dev>(AdamWOptions{}), "adamw_default");
  check_fixture_steps(
      AdamW<float, Dev>({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.1, .amsgrad = true}),
      "adamw_amsgrad");
  check_fixture_steps(RmsProp<float, Dev>(RmsPropOptions{}), "rmsprop_default");
  check_fixture_steps(
      RmsProp<float, Dev>({.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.9}),
      "rmsprop_momentum_wd");
  check_fixture_steps(RmsProp<float, Dev>({.lr = 0.01, .centered = true}), "rmsprop_centered");
  check_fixture_steps(
      RmsProp<float, Dev>({.lr = 0.005, .alpha = 0.95, .weight_decay = 0.01, .momentum = 0.8, .centered = true}),
      "rmsprop_centered_momentum");
}

TEST_CASE("device optimisers: parameter groups and gradient clipping match torch's over 3 steps") {
  check_fixture_groups_and_clipping(
      Sgd<float, Dev>({.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}), "sgd_groups_clip", 0.5,
      4.0);
  check_fixture_groups_and_clipping(AdamW<float, Dev>({.lr = 0.01, .weight_decay = 0.05}), "adamw_groups_clip", 2.0,
                                    3.0);
  check_fixture_groups_and_clipping(RmsProp<float, Dev>({.lr = 0.01, .weight_decay = 0.01, .momentum = 0.9}),
                                    "rmsprop_groups_clip", 0.25, 5.0);
}

TEST_CASE("device optimisers: SGD, Adam and Adadelta match torch.optim over 3 steps, state included") {
  check_fixture_steps(Sgd<float, Dev>({.lr = 0.1}), "sgd_plain");
  check_fixture_steps(Sgd<float, Dev>({.lr = 0.1, .momentum = 0.9}), "sgd_momentum");
  check_fixture_steps(Sgd<float, Dev>({.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}),
                      "sgd_dampening_wd");
  check_fixture_steps(Sgd<float, Dev>({.lr = 0.1, .dampening = 0.5, .weight_decay = 0.01}),
                      "sgd_dampening_no_momentum");
  check_fixture_steps(Sgd<float, Dev>({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true}),
                      "sgd_nesterov");
  check_fixture_steps(Adam<float, Dev>({.lr = 1e-3}), "adam_default");
  check_fixture_steps(
      Adam<float, Dev>({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.1, .amsgrad = true}),
      "adam_amsgrad_wd");
  check_fixture_steps(Adadelta<float, Dev>(AdadeltaOptions{}), "adadelta_default");
  check_fixture_steps(Adadelta<float, Dev>({.lr = 0.5, .rho = 0.95, .eps = 1e-5, .weight_decay = 0.05}),
                      "adadelta_custom");
}

TEST_CASE("device optimisers: SGD, Adam and Adadelta step like the CPU's") {
  const SgdOptions nesterov{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  check_steps_like_cpu(Sgd<float>(nesterov), Sgd<float, Dev>(nesterov), "SGD, Nesterov momentum, weight decay");
  const SgdOptions plain{.lr = 0.1, .dampening = 0.5}; // dampening is ignored without momentum
  check_steps_like_cpu(Sgd<float>(plain), Sgd<float, Dev>(plain), "SGD without momentum");
  const AdamOptions ams{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true};
  check_steps_like_cpu(Adam<float>(ams), Adam<float, Dev>(ams), "Adam, AMSGrad, weight decay");
  check_steps_like_cpu(Adam<float>({.lr = 1e-3, .eps = 1e-7}), Adam<float, Dev>({.lr = 1e-3, .eps = 1e-7}), "Adam");
  check_steps_like_cpu(Adadelta<float>({.lr = 0.5}), Adadelta<float, Dev>({.lr = 0.5}), "Adadelta");
}
