#pragma once
// Runs one layer inside a one-layer network against a PyTorch fixture, and through the gradient
// check. Every layer test uses these two, so every layer is held to the same standard.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/cohort.hpp>

#include "compare.hpp"
#include "fixtures.hpp"
#include "gradcheck.hpp"

namespace cohort::test {

template <class S, class L>
struct single_layer;
template <std::size_t... D, class L>
struct single_layer<Shape<D...>, L> {
  using type = Sequential<Input<D...>, L>;
};
/// `Sequential<Input<S...>, L>`.
template <class S, class L>
using single_layer_net = typename single_layer<S, L>::type;

/// Tolerance of the layer parity tests: max |cohort - torch| <= 1e-5 * max |torch| per tensor
/// (check_layer_fixture: float_parity_rtol(), 2e-5 on the AVX2 and AVX-512 paths, which run
/// Winograd F(4x4) on some layers).
inline constexpr double layer_rtol = 1e-5;

/// Checks the parameter gradients ("g.*") and buffers after the pass ("after.*") of fixture `f`
/// against `net` (a host network holding the layer at position 0). A gradient that is
/// analytically zero (a convolution's bias before a BatchNorm in train mode) holds only rounding
/// noise, with no scale of its own: it must stay under 1e-5 of the fixture's largest parameter
/// gradient (measured: 3e-6 of it on the CPU, 4e-6 on ThrustDevice, in the residual blocks'
/// fixtures), as check_reference.py holds such tensors.
template <class Net>
void check_fixture_gradients_and_buffers(const SafetensorsFile& f, Network<Net>& net, const std::string& name) {
  double largest_gradient = 0;
  for (const auto& e : f.entries())
    if (e.name.rfind("g.", 0) == 0)
      for (float v : f.values<float>(e.name)) largest_gradient = std::max(largest_gradient, double(std::abs(v)));
  const double noise_floor = 1e-5 * largest_gradient;
  for (const auto& e : f.entries()) {
    if (e.name.rfind("g.", 0) == 0) {
      const auto g = gradient_of(net, "0." + e.name.substr(2));
      const auto expected = f.values<float>(e.name);
      double largest = 0, largest_actual = 0;
      for (float v : expected) largest = std::max(largest, double(std::abs(v)));
      for (auto v : g) largest_actual = std::max(largest_actual, double(std::abs(v)));
      if (largest < noise_floor) {
        INFO(name << " " << e.name << " is analytically zero: largest value " << largest_actual << ", noise floor "
                  << noise_floor);
        CHECK(largest_actual <= noise_floor);
        continue;
      }
      COHORT_CHECK_CLOSE(g, std::span<const float>(expected), float_parity_rtol(), name + " " + e.name);
    } else if (e.name.rfind("after.", 0) == 0) {
      const auto b = tensor_values(net, "0." + e.name.substr(6));
      if (e.dtype == DType::i64) {
        CHECK(b[0] == double(f.values<std::int64_t>(e.name)[0]));
      } else {
        COHORT_CHECK_CLOSE(std::span<const double>(b), std::span<const float>(f.values<float>(e.name)),
                           float_parity_rtol(), name + " " + e.name);
      }
    }
  }
}

/// Loads inputs and parameters from fixture `name`, then checks forward output, input gradient,
/// parameter gradients, buffers after the pass and (when present) 3 SGD(lr 0.1, momentum 0.9)
/// steps on the loss sum(y * dy).
template <class L, class InShape>
void check_layer_fixture(const std::string& name, Mode mode = Mode::train, std::uint64_t seed = 0,
                         std::uint64_t step = 0) {
  using Net = single_layer_net<InShape, L>;
  using Out = typename Net::output_shape;
  const auto f = fixture(name);
  Network<Net> net;
  net.set_seed(seed);
  net.set_step(step);
  for (const auto& e : f.entries())
    if (e.name.rfind("p.", 0) == 0) load_tensor(net, f, e.name, "0." + e.name.substr(2));
  mode == Mode::train ? net.train() : net.eval();

  const auto x = f.values<float>("x");
  const auto dy = f.values<float>("dy");
  const std::size_t batch = x.size() / InShape::size;
  REQUIRE(batch * InShape::size == x.size());
  auto y = net.forward(ConstBatchView<InShape, float>(x.data(), batch));
  COHORT_CHECK_CLOSE(y.span(), std::span<const float>(f.values<float>("y")), float_parity_rtol(), name + " y");
  auto dx = net.backward(ConstBatchView<Out, float>(dy.data(), batch), {.input_grad = true});
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), float_parity_rtol(), name + " dx");
  check_fixture_gradients_and_buffers(f, net, name);
  const bool has_steps = std::any_of(f.entries().begin(), f.entries().end(),
                                     [](const SafetensorsEntry& e) { return e.name.rfind("step1.", 0) == 0; });
  if (has_steps) {
    Sgd<float> opt({.lr = 0.1, .momentum = 0.9});
    for (int s = 1; s <= 3; ++s) {
      net.forward(ConstBatchView<InShape, float>(x.data(), batch));
      net.backward(ConstBatchView<Out, float>(dy.data(), batch));
      opt.step(net);
      for (const auto& e : f.entries()) {
        const std::string prefix = "step" + std::to_string(s) + ".";
        if (e.name.rfind(prefix, 0) != 0) continue;
        const auto p = tensor_values(net, "0." + e.name.substr(prefix.size()));
        COHORT_CHECK_CLOSE(std::span<const double>(p), std::span<const float>(f.values<float>(e.name)),
                           float_parity_rtol(), name + " " + e.name);
      }
    }
  }
}

/// Finite-difference check of layer L on `batch` random samples of InShape, in `mode`.
template <class L, class InShape>
void gradcheck_layer(std::size_t batch, Mode mode, const GradCheckOptions& o = {}, std::uint64_t seed = 3) {
  using Net = single_layer_net<InShape, L>;
  Network<Net, double> net(seed);
  // Non-trivial parameters and statistics (the defaults are ones and zeros for BatchNorm).
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  for (const TensorRef& t : net.state_dict()) {
    if (t.dtype != DType::f64) continue;
    auto* p = static_cast<double*>(t.data);
    for (std::size_t i = 0; i < t.size; ++i)
      p[i] = t.name.find("running_var") != std::string::npos ? 0.5 + std::abs(normal(gen)) : p[i] + 0.3 * normal(gen);
  }
  std::vector<double> x(batch * InShape::size);
  for (auto& v : x) {
    v = normal(gen);
    if (std::abs(v) < 1e-3) v += 0.01; // keep away from the kinks of ReLU and max
  }
  check_network_gradients(net, x, batch, mode, o, seed);
}

} // namespace cohort::test
