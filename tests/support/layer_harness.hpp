#pragma once
// Runs one layer inside a one-layer network against a PyTorch fixture, and through the gradient
// check. Every layer test uses these two, so every layer is held to the same standard.

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

/// Tolerance of the layer parity tests: max |cohort - torch| <= 1e-5 * max |torch| per tensor.
inline constexpr double layer_rtol = 1e-5;

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
  COHORT_CHECK_CLOSE(y.span(), std::span<const float>(f.values<float>("y")), layer_rtol, name + " y");
  auto dx = net.backward(ConstBatchView<Out, float>(dy.data(), batch), {.input_grad = true});
  COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx")), layer_rtol, name + " dx");
  for (const auto& e : f.entries()) {
    if (e.name.rfind("g.", 0) == 0) {
      const auto g = gradient_of(net, "0." + e.name.substr(2));
      COHORT_CHECK_CLOSE(g, std::span<const float>(f.values<float>(e.name)), layer_rtol, name + " " + e.name);
    } else if (e.name.rfind("after.", 0) == 0) {
      const auto b = tensor_values(net, "0." + e.name.substr(6));
      if (e.dtype == DType::i64) {
        CHECK(b[0] == double(f.values<std::int64_t>(e.name)[0]));
      } else {
        COHORT_CHECK_CLOSE(std::span<const double>(b), std::span<const float>(f.values<float>(e.name)), layer_rtol,
                           name + " " + e.name);
      }
    }
  }
  if (f.find("step1.weight") || f.find("step1.bias")) {
    Sgd<float> opt({.lr = 0.1, .momentum = 0.9});
    for (int s = 1; s <= 3; ++s) {
      net.forward(ConstBatchView<InShape, float>(x.data(), batch));
      net.backward(ConstBatchView<Out, float>(dy.data(), batch));
      opt.step(net);
      for (const auto& e : f.entries()) {
        const std::string prefix = "step" + std::to_string(s) + ".";
        if (e.name.rfind(prefix, 0) != 0) continue;
        const auto p = tensor_values(net, "0." + e.name.substr(prefix.size()));
        COHORT_CHECK_CLOSE(std::span<const double>(p), std::span<const float>(f.values<float>(e.name)), layer_rtol,
                           name + " " + e.name);
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
