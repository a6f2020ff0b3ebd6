#pragma once
// The one finite-difference gradient check every layer and loss goes through.
//
//   check_gradient(f, vars, analytic, opts, "what")   compares analytic[i] with the central
//                                                      difference of f() in vars[i]
//   check_network_gradients(net, x, opts)             runs it on the input and every parameter of
//                                                      a double-precision network, loss = sum(y * r)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <cohort/network/network.hpp>

namespace cohort::test {

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-8;
  std::size_t max_checks = 96; // variables checked per tensor (a spread-out sample beyond that)
};

/// CHECKs d f / d vars[i] == analytic[i] by central differences, for up to max_checks indices.
inline void check_gradient(const std::function<double()>& f, std::span<double> vars, std::span<const double> analytic,
                           const GradCheckOptions& o, const std::string& what) {
  REQUIRE(vars.size() == analytic.size());
  const std::size_t n = vars.size();
  const std::size_t stride = std::max<std::size_t>(1, n / o.max_checks);
  std::size_t checked = 0, bad = 0;
  double worst = 0;
  std::ostringstream first_bad;
  for (std::size_t i = (n > o.max_checks ? stride / 2 : 0); i < n; i += stride) {
    const double saved = vars[i];
    vars[i] = saved + o.eps;
    const double up = f();
    vars[i] = saved - o.eps;
    const double down = f();
    vars[i] = saved;
    const double numeric = (up - down) / (2 * o.eps);
    const double err = std::abs(numeric - analytic[i]);
    const double allowed = o.atol + o.rtol * std::max(std::abs(numeric), std::abs(analytic[i]));
    worst = std::max(worst, err / std::max(allowed, 1e-300));
    if (!(err <= allowed) && bad++ == 0)
      first_bad << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
    ++checked;
  }
  INFO(what << ": " << checked << " of " << n << " entries checked, " << bad << " outside tolerance; "
            << first_bad.str());
  CHECK(bad == 0);
  CHECK(checked > 0);
}

/// Gradient check of a whole double-precision network in `mode`: the input and every parameter.
/// Random numbers (dropout) are replayed identically for every evaluation.
template <class Net>
void check_network_gradients(Network<Net, double>& net, std::vector<double>& x, std::size_t batch, Mode mode,
                             const GradCheckOptions& o = {}, std::uint64_t seed = 7) {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  REQUIRE(x.size() == batch * In::size);
  if (mode == Mode::train)
    net.train();
  else
    net.eval();
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<double> r(batch * Out::size);
  for (auto& v : r) v = normal(gen);
  const std::uint64_t step = net.step();

  auto loss = [&] {
    net.set_step(step);
    auto y = net.forward(ConstBatchView<In, double>(x.data(), batch));
    double s = 0;
    for (std::size_t i = 0; i < r.size(); ++i) s += y.data()[i] * r[i];
    return s;
  };
  loss();
  const auto dx_view = net.backward(ConstBatchView<Out, double>(r.data(), batch), {.input_grad = true});
  const std::vector<double> dx(dx_view.data(), dx_view.data() + dx_view.size());
  const std::vector<double> grads(net.gradients().values.begin(), net.gradients().values.end());

  check_gradient(loss, x, dx, o, "d/dx");
  for (const TensorRef& t : net.parameters().state_dict()) {
    if (t.kind != TensorKind::parameter) continue;
    auto* p = static_cast<double*>(t.data);
    const std::size_t off = std::size_t(p - net.parameters().values.data());
    check_gradient(loss, std::span<double>(p, t.size), std::span<const double>(grads.data() + off, t.size), o,
                   "d/d" + t.name);
  }
  net.set_step(step);
}

} // namespace cohort::test
