#pragma once
// A whole model against its PyTorch fixture (tests/reference/make_reference.py's make_models),
// from the same cohort-initialised weights: forward output, input gradient and every parameter
// gradient of the first batch, the loss of 3 training steps with the given optimiser, and all
// parameters and buffers after them. Used by tests/models/.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

namespace cohort::test {

// Values are compared to 1e-5 of each tensor's largest magnitude.
constexpr double model_rtol = 1e-5;
// Except parameters after Adam steps (models C and D): Adam divides each gradient entry by its
// own running magnitude, so an entry 1000x smaller than the tensor's largest, which summation
// order alone leaves with a 1e-3 relative error, moves its weight by lr +- 0.1%. The meaningful
// unit is then the step size: these are checked to 2% of one step (|diff| <= 0.02 lr).
// Measured: PyTorch itself, 2 threads vs 1, differs by 0.0011 lr on model D; cohort vs PyTorch
// by 0.0055 lr (D) and 0.00035 lr (C).
constexpr double adam_after_lr_fraction = 0.02;

/// Fixture tensor `key` (or its strided sample `key.everyN`) against the network tensor values.
inline void check_tensor(const SafetensorsFile& f, const std::string& key, std::span<const double> actual,
                         const std::string& what, double rtol = model_rtol, double atol = 0) {
  const std::size_t stride = std::stoul(f.metadata().at("stride"));
  if (f.find(key)) {
    const auto e = f.at(key);
    if (e.dtype == DType::i64) {
      CHECK(actual[0] == double(f.values<std::int64_t>(key)[0]));
      return;
    }
    COHORT_CHECK_CLOSE_ABS(actual, std::span<const float>(f.values<float>(key)), rtol, atol, what);
    return;
  }
  const std::string sampled = key + ".every" + std::to_string(stride);
  REQUIRE_MESSAGE(f.find(sampled), "fixture has neither " << key << " nor " << sampled);
  std::vector<double> picked;
  for (std::size_t i = 0; i < actual.size(); i += stride) picked.push_back(actual[i]);
  COHORT_CHECK_CLOSE_ABS(std::span<const double>(picked), std::span<const float>(f.values<float>(sampled)), rtol, atol,
                         what + " (every " + std::to_string(stride) + "th element)");
}

/// `zero_grads`: parameters whose gradient is exactly zero in exact arithmetic (a convolution's
/// bias right before a BatchNorm, which subtracts the mean): both frameworks leave rounding noise
/// there, so the check is that both are negligible next to the network's largest gradient.
template <class Model, class Loss, class Opt>
void check_model(const std::string& name, Opt opt, double after_atol = 0,
                 const std::vector<std::string>& zero_grads = {}) {
  const auto f = fixture("model_" + name);
  Network<Model> net(0);
  Loss loss;
  for (const auto& t : net.state_dict()) {
    const std::string key = "init_head." + t.name;
    const auto v = tensor_values(net, t.name);
    if (t.dtype == DType::i64) {
      CHECK(v[0] == double(f.values<std::int64_t>(key)[0]));
      continue;
    }
    const auto head = f.values<float>(key);
    for (std::size_t i = 0; i < head.size(); ++i)
      REQUIRE_MESSAGE(float(v[i]) == head[i], "initial " << t.name << "[" << i << "] differs from the mirror");
  }
  for (int s = 0; s < 3; ++s) {
    const auto x = f.values<float>("x" + std::to_string(s));
    const auto labels = f.values<std::int32_t>("labels" + std::to_string(s));
    auto y = net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), labels.size()));
    const double l = loss.forward(y, labels);
    CHECK(l == doctest::Approx(f.values<float>("loss" + std::to_string(s))[0]).epsilon(1e-5));
    auto dx = net.backward(loss.backward(), {.input_grad = s == 0});
    if (s == 0) {
      COHORT_CHECK_CLOSE(y.span(), std::span<const float>(f.values<float>("y0")), model_rtol, name + " y0");
      COHORT_CHECK_CLOSE(dx.span(), std::span<const float>(f.values<float>("dx0")), model_rtol, name + " dx0");
      double largest = 0;
      for (float v : net.gradients().values) largest = std::max(largest, double(std::abs(v)));
      for (const auto& t : net.state_dict()) {
        if (t.kind != TensorKind::parameter) continue;
        const auto g = gradient_of(net, t.name);
        const std::vector<double> gd(g.begin(), g.end());
        if (std::find(zero_grads.begin(), zero_grads.end(), t.name) != zero_grads.end()) {
          for (float v : f.values<float>("g0." + t.name)) CHECK(std::abs(v) < 1e-5 * largest);
          for (double v : gd) CHECK(std::abs(v) < 1e-5 * largest);
          continue;
        }
        check_tensor(f, "g0." + t.name, gd, name + " grad " + t.name);
      }
    }
    opt.step(net);
  }
  for (const auto& t : net.state_dict()) {
    const auto v = tensor_values(net, t.name);
    check_tensor(f, "after." + t.name, v, name + " after 3 steps: " + t.name, model_rtol, after_atol);
  }
}

} // namespace cohort::test
