#pragma once
// The device backends against the PyTorch fixtures and against the CPU backend: the same
// networks, built on both, fed the same data; results copied back to the host and compared.

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/backend/device/device_buffer.hpp>
#include <cohort/cohort.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/layer_harness.hpp"
#include "support/skip.hpp"

// A GPU build defines COHORT_TEST_DEVICE_COUNT (visible GPUs) before including the cases:
// cases needing more devices skip (support/skip.hpp), the first thing they do.
#if defined(COHORT_TEST_DEVICE_COUNT)
#define COHORT_REQUIRE_DEVICES(n)                                                                                      \
  if (COHORT_TEST_DEVICE_COUNT < (n))                                                                                  \
  COHORT_SKIP("needs " << (n) << " devices, this machine has " << COHORT_TEST_DEVICE_COUNT)
#else
#define COHORT_REQUIRE_DEVICES(n) static_assert((n) > 0)
#endif

namespace cohort::test {

/// A host network holding a device network's parameters, statistics and gradients, so the
/// host helpers (tensor_values, gradient_of) can read them.
template <class Net, class T, class Backend>
Network<Net, T> host_mirror(Network<Net, T, Backend>& dev) {
  Network<Net, T> mirror;
  mirror.parameters().copy_from(dev.parameters());
  cohort::detail::copy_store(mirror.gradients().values, dev.gradients().values);
  return mirror;
}

/// check_layer_fixture (support/layer_harness.hpp) with the layer running on `Backend`:
/// forward output, input gradient, parameter gradients and buffers against PyTorch.
template <class Backend, class L, class InShape>
void check_layer_fixture_on(const std::string& name, Mode mode = Mode::train, std::uint64_t seed = 0,
                            std::uint64_t step = 0) {
  using Net = single_layer_net<InShape, L>;
  using Out = typename Net::output_shape;
  const auto f = fixture(name);
  Network<Net> host;
  for (const auto& e : f.entries())
    if (e.name.rfind("p.", 0) == 0) load_tensor(host, f, e.name, "0." + e.name.substr(2));
  Network<Net, float, Backend> net(seed);
  net.parameters().copy_from(host.parameters());
  net.set_step(step);
  mode == Mode::train ? net.train() : net.eval();

  const auto x = f.values<float>("x");
  const auto dy = f.values<float>("dy");
  const std::size_t batch = x.size() / InShape::size;
  REQUIRE(batch * InShape::size == x.size());
  DeviceBuffer<float> xd, dyd;
  xd.assign_from_host(x.data(), x.size());
  dyd.assign_from_host(dy.data(), dy.size());
  const auto y = net.forward(ConstBatchView<InShape, float>(xd.data(), batch));
  COHORT_CHECK_CLOSE(copy_to_host(y.data(), y.size()), f.values<float>("y"), layer_rtol, name + " y");
  const auto dx = net.backward(ConstBatchView<Out, float>(dyd.data(), batch), {.input_grad = true});
  COHORT_CHECK_CLOSE(copy_to_host(dx.data(), dx.size()), f.values<float>("dx"), layer_rtol, name + " dx");

  auto mirror = host_mirror(net);
  check_fixture_gradients_and_buffers(f, mirror, name);
}

/// Random values in [-1, 1), quantised to multiples of 1/`levels` when levels > 0 (so maxima
/// tie and ReLU inputs hit 0 exactly).
inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, int levels = 0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& e : v) e = levels > 0 ? std::round(u(gen) * float(levels)) / float(levels) : u(gen);
  return v;
}

struct CpuParityOptions {
  std::size_t batch = 3;
  Mode mode = Mode::train;
  double rtol = 1e-5;
  bool fusion = true;
  int levels = 0;        // quantise the inputs (ties, exact zeros)
  std::size_t steps = 1; // forward/backward passes (running statistics, dropout masks move on)
  // Gradient tensors under this fraction of the store's largest gradient are analytically zero
  // (a convolution's bias before BatchNorm: measured at most 1.6e-7 of it), and checked only to
  // stay under it (compare_tensors; the backends differ there by at most 4.3e-7 of the store's
  // largest gradient, margin 23x). check_reference.py uses the same 1e-5.
  double noise = 1e-5;
};

/// Network `Net` on `Backend` and on the CPU, same seed and data: outputs, input gradients,
/// parameter gradients and running statistics agree to `o.rtol` (relative to each tensor's
/// largest magnitude, tensor by tensor in the stores) after every pass.
template <class Net, class Backend>
void check_against_cpu(const CpuParityOptions& o = {}) {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  Network<Net> cpu(7);
  Network<Net, float, Backend> dev(7);
  cpu.executor().set_fusion(o.fusion);
  dev.executor().set_fusion(o.fusion);
  o.mode == Mode::train ? (cpu.train(), dev.train()) : (cpu.eval(), dev.eval());
  {
    auto mirror = host_mirror(dev); // initialised on the host, copied up: bitwise the same
    CHECK(std::vector<float>(mirror.parameters().values.begin(), mirror.parameters().values.end()) ==
          std::vector<float>(cpu.parameters().values.begin(), cpu.parameters().values.end()));
  }
  for (std::size_t s = 0; s < o.steps; ++s) {
    const auto x = random_values(o.batch * In::size, 100 + s, o.levels);
    const auto dy = random_values(o.batch * Out::size, 200 + s);
    DeviceBuffer<float> xd, dyd;
    xd.assign_from_host(x.data(), x.size());
    dyd.assign_from_host(dy.data(), dy.size());
    const auto y_cpu = cpu.forward(ConstBatchView<In, float>(x.data(), o.batch));
    const auto y_dev = dev.forward(ConstBatchView<In, float>(xd.data(), o.batch));
    const std::string at = " (pass " + std::to_string(s) + ")";
    COHORT_CHECK_CLOSE(copy_to_host(y_dev.data(), y_dev.size()), y_cpu.span(), o.rtol, "y" + at);
    const auto dx_cpu = cpu.backward(ConstBatchView<Out, float>(dy.data(), o.batch), {.input_grad = true});
    const auto dx_dev = dev.backward(ConstBatchView<Out, float>(dyd.data(), o.batch), {.input_grad = true});
    COHORT_CHECK_CLOSE(copy_to_host(dx_dev.data(), dx_dev.size()), dx_cpu.span(), o.rtol, "dx" + at);
    auto mirror = host_mirror(dev);
    const auto grads = compare_tensors<Net>(mirror.gradients().values, cpu.gradients().values, o.rtol, "gradients" + at,
                                            TensorKind::parameter, o.noise);
    const auto stats = compare_tensors<Net>(mirror.parameters().buffers, cpu.parameters().buffers, o.rtol,
                                            "running statistics" + at, TensorKind::buffer);
    if (report_measurements()) MESSAGE(grads.message << "\n" << stats.message);
    INFO(grads.message);
    CHECK(grads.ok);
    INFO(stats.message);
    CHECK(stats.ok);
    CHECK(std::vector<std::int64_t>(mirror.parameters().counters.begin(), mirror.parameters().counters.end()) ==
          std::vector<std::int64_t>(cpu.parameters().counters.begin(), cpu.parameters().counters.end()));
  }
}

} // namespace cohort::test
