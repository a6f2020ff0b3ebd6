#pragma once
// Element-by-element checks of a parameter-free activation against formulas written here in
// double precision (independently of the kernels' rules): the float forward and input gradient
// on the vector body and the scalar tail, the double network's gradient through
// check_network_gradients (gradcheck.hpp), and the exact values torch gives at the kinks.

#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include <doctest/doctest.h>

#include "layer_harness.hpp"

namespace cohort::test {

struct ActivationReference {
  std::function<double(double)> f;  // y(x)
  std::function<double(double)> df; // dy/dx, torch's choice at the kinks
  std::vector<double> kinks;        // kept at least `fd_margin` away from in the finite differences
  double rtol = 1e-6;               // float results, relative to |value| ...
  double atol = 1e-7;               // ... plus this
};

/// Checks L on a grid over [-10, 10.3] (128 elements: vector bodies of every width), the kinks themselves,
/// and far-out values; gradients with dy = 1.
template <class L>
void check_activation_elementwise(const ActivationReference& r) {
  constexpr std::size_t n = 128;
  std::vector<float> x;
  for (std::size_t i = 0; x.size() < n - 24; ++i) x.push_back(-10.f + 0.1973f * float(i));
  for (double k : r.kinks) x.push_back(float(k));
  for (float v : {0.f, -0.f, 1e-6f, -1e-6f, 1e-20f, 20.f, -20.f, 50.f, -50.f, 88.f, -88.f, 100.f, -100.f, 1e4f, -1e4f})
    x.push_back(v);
  while (x.size() < n) x.push_back(0.37f * float(x.size() % 7) - 1.f);
  using In = Shape<n>;
  Network<single_layer_net<In, L>> net;
  const auto y = net.forward(ConstBatchView<In, float>(x.data(), 1));
  const std::vector<float> ones(n, 1.f);
  const auto dx = net.backward(ConstBatchView<In, float>(ones.data(), 1), {.input_grad = true});
  for (std::size_t i = 0; i < n; ++i) {
    CAPTURE(x[i]);
    const double want = r.f(double(x[i])), want_grad = r.df(double(x[i]));
    CHECK(std::isfinite(y.data()[i]));
    CHECK(std::isfinite(dx.data()[i]));
    CHECK(std::abs(double(y.data()[i]) - want) <= r.rtol * std::abs(want) + r.atol);
    CHECK(std::abs(double(dx.data()[i]) - want_grad) <= r.rtol * std::abs(want_grad) + r.atol);
  }

  // The double path (the rules' double overloads) through the suite's finite-difference check,
  // on grid points away from the kinks.
  constexpr double fd_margin = 1e-3;
  std::vector<double> xd;
  for (float v : x) {
    bool near_kink = false;
    for (double k : r.kinks) near_kink = near_kink || std::abs(double(v) - k) < fd_margin;
    if (!near_kink && std::abs(v) < 30.f) xd.push_back(double(v));
  }
  constexpr std::size_t m = 96; // grid points from -10 to 8.7: every kink's neighbourhood
  REQUIRE(xd.size() >= m);
  xd.resize(m);
  Network<single_layer_net<Shape<m>, L>, double> dnet;
  check_network_gradients(dnet, xd, 1, Mode::train, {.eps = 1e-5, .rtol = 1e-6, .atol = 1e-8, .max_checks = m});
}

} // namespace cohort::test
