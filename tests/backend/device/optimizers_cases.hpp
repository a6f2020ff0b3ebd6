#pragma once
// The optimisers on the device backend `Dev` (chosen by the including file): their element rules
// run as device kernels over state in device memory, and must step like the CPU's.
#include <doctest/doctest.h>

#include "support/device_harness.hpp"

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
} // namespace

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
