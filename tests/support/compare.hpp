#pragma once
// Tensor comparison for parity tests: max |a - b| <= rtol * max |b| over the tensor. Relative to
// the tensor's scale, not element by element: a gradient entry that is 1e-9 where its neighbours
// are 1 carries no information about correctness at float precision. Not relative to a whole
// store either: next to a weight of magnitude 1, a bias of magnitude 1e-3 could be entirely wrong
// within 1e-5 of the store's largest value. Stores are compared tensor by tensor
// (compare_tensors).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include <cohort/backend/cpu/simd.hpp>
#include <cohort/network/sequential.hpp>

namespace cohort::test {

struct Comparison {
  bool ok = true;
  double worst = 0; // max |a - b| / max |b|
  std::size_t at = 0;
  std::string message;
};

/// Passes when max |actual - expected| <= rtol * max |expected| + atol.
template <class A, class B>
Comparison compare(std::span<const A> actual, std::span<const B> expected, double rtol, const std::string& what,
                   double atol = 0) {
  Comparison c;
  if (actual.size() != expected.size()) {
    c.ok = false;
    c.message = what + ": size " + std::to_string(actual.size()) + " vs expected " + std::to_string(expected.size());
    return c;
  }
  double scale = 0;
  for (auto v : expected) scale = std::max(scale, std::abs(double(v)));
  scale = std::max(scale, 1e-30);
  const double limit = rtol + atol / scale; // the whole bound, in units of max |expected|
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double d = std::abs(double(actual[i]) - double(expected[i])) / scale;
    if (!(d <= c.worst)) { // also catches NaN
      c.worst = std::isnan(d) ? INFINITY : d;
      c.at = i;
    }
  }
  c.ok = c.worst <= limit;
  std::ostringstream os;
  os << what << ": worst difference " << c.worst << " of max |expected| at element " << c.at << " (actual "
     << (actual.empty() ? 0.0 : double(actual[c.at])) << ", expected "
     << (expected.empty() ? 0.0 : double(expected[c.at])) << ", limit " << rtol << ")";
  c.message = os.str();
  return c;
}

/// Any contiguous range (vector, span, HostBuffer, a temporary) as a span of const elements, for
/// the macros below (one full expression, so temporaries outlive the comparison).
template <class C>
auto const_span(const C& c) {
  using E = std::remove_cvref_t<decltype(*std::data(c))>;
  return std::span<const E>(std::data(c), std::size(c));
}

/// max |a - b| / max |b| over two same-sized ranges (infinite when a difference is NaN or the
/// sizes differ), for tests that bound or report it themselves.
template <class A, class B>
double relative_difference(const A& a, const B& b) {
  const std::span sa(a), sb(b);
  if (sa.size() != sb.size()) return INFINITY;
  return compare(std::span<const typename decltype(sa)::value_type>(sa),
                 std::span<const typename decltype(sb)::value_type>(sb), 0, "")
      .worst;
}

/// What compare_tensors found: the worst tensor (by its difference over its limit) and every
/// tensor over its limit.
struct TensorComparison {
  bool ok = true;
  double worst = 0;   // the worst tensor's max |a - b| / max |b|
  std::string tensor; // its state_dict name
  std::string message;
};

/// Compares two flat stores of network `Net` (its `values`, or its `buffers` with `kind` =
/// TensorKind::buffer; state_dict order, the layout's offsets) tensor by tensor, each to `rtol` of
/// its own largest magnitude. `noise`: a tensor whose largest expected magnitude is under `noise`
/// times the store's largest is analytically zero (a convolution's bias gradient before a
/// BatchNorm): its rounding noise carries no scale of its own, so it only has to stay under that
/// floor. 0 (the default): no such tensors.
template <class Net, class A, class B>
TensorComparison compare_tensors(const A& actual, const B& expected, double rtol, const std::string& what,
                                 TensorKind kind = TensorKind::parameter, double noise = 0) {
  const auto a = const_span(actual);
  const auto b = const_span(expected);
  TensorComparison out;
  const std::size_t store = kind == TensorKind::parameter ? Net::parameter_store_size : Net::buffer_store_size;
  if (a.size() != store || b.size() != store) {
    out.ok = false;
    out.worst = INFINITY;
    out.message = what + ": sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                  ", the network's store has " + std::to_string(store);
    return out;
  }
  double store_max = 0;
  for (auto v : b) store_max = std::max(store_max, std::abs(double(v)));
  double worst_ratio = -1;
  std::string failed;
  for (const LayoutEntry& e : Net::layout.entries) {
    if (e.kind != kind) continue;
    const auto ta = a.subspan(e.offset, e.spec.size());
    const auto tb = b.subspan(e.offset, e.spec.size());
    double tensor_max = 0;
    for (auto v : tb) tensor_max = std::max(tensor_max, std::abs(double(v)));
    const bool is_noise = tensor_max < noise * store_max;
    // Noise: every |actual - expected| under the floor, in units of the floor.
    const Comparison c = is_noise ? compare(ta, tb, 0, "", noise * store_max) : compare(ta, tb, rtol, "");
    const double limit = is_noise ? noise * store_max / std::max(tensor_max, 1e-30) : rtol;
    const double ratio = c.worst / std::max(limit, 1e-300);
    std::ostringstream os;
    os << what << ": tensor " << e.name() << (is_noise ? " (analytically zero)" : "") << " differs by " << c.worst
       << " of its largest magnitude " << tensor_max << " at element " << c.at << " (limit " << limit << ")";
    if (!c.ok) {
      out.ok = false;
      failed += (failed.empty() ? "" : ", ") + e.name();
    }
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      out.worst = c.worst;
      out.tensor = e.name();
      out.message = os.str();
    }
  }
  if (!failed.empty()) out.message += "; over the limit: " + failed;
  return out;
}

/// The largest `metric(tensor of a, tensor of b)` over the tensors of two flat stores of `Net`,
/// and that tensor's name (infinite when the stores are too small or a metric is NaN).
template <class Net, class A, class B, class Metric>
std::pair<double, std::string> worst_tensor(const A& a, const B& b, Metric&& metric,
                                            TensorKind kind = TensorKind::parameter) {
  const auto sa = const_span(a);
  const auto sb = const_span(b);
  double worst = 0;
  std::string name;
  for (const LayoutEntry& e : Net::layout.entries) {
    if (e.kind != kind) continue;
    if (sa.size() < e.offset + e.spec.size() || sb.size() < e.offset + e.spec.size()) return {INFINITY, e.name()};
    const double d = metric(sa.subspan(e.offset, e.spec.size()), sb.subspan(e.offset, e.spec.size()));
    if (!(d <= worst)) {
      worst = std::isnan(d) ? INFINITY : d;
      name = e.name();
    }
  }
  return {worst, name};
}

/// The worst per-tensor max |a - b| / max |b| of two flat stores of `Net`, and that tensor's
/// name: relative_difference tensor by tensor, for tests that bound or report it themselves.
template <class Net, class A, class B>
std::pair<double, std::string> worst_tensor_difference(const A& a, const B& b,
                                                       TensorKind kind = TensorKind::parameter) {
  return worst_tensor<Net>(
      a, b, [](auto x, auto y) { return compare(x, y, 0, "").worst; }, kind);
}

/// The parity bound of a float step against PyTorch's float64 reference: 1e-5 of a tensor's
/// largest value on the baseline path, 2e-5 on the AVX2 and AVX-512 paths, whose tables run
/// Winograd F(4x4, 3x3) by default on some layers (AVX2: 16-23 channels and planes of at most
/// 8x8; AVX-512: planes of at most 8x8 from 32 channels; backend/cpu/conv2d_winograd_choice.hpp).
/// Measured on AVX2: up to 1.22e-5 (ResNet-20's first step, g0.19.body.0.weight, a 64-channel 7x7
/// layer; 1.01e-5 on a U-Net level), against <= 4e-6 with the direct kernel and F(2x2); on
/// AVX-512 up to 5.6e-6 there (g0.15.body.1.bias, COHORT_TEST_REPORT=1, an Intel machine).
inline double float_parity_rtol() { return cpu::active_isa() == Isa::generic ? 1e-5 : 2e-5; }

/// Whether COHORT_TEST_REPORT is set: tests then print the differences their bounds were set
/// from (how to measure them again).
inline bool report_measurements() { return std::getenv("COHORT_TEST_REPORT") != nullptr; }

} // namespace cohort::test

/// CHECK that two flat stores of network `Net` agree tensor by tensor (compare_tensors).
#define COHORT_CHECK_TENSORS_CLOSE(Net, actual, expected, rtol, what)                                                  \
  do {                                                                                                                 \
    const auto cohort_cmp_ = ::cohort::test::compare_tensors<Net>(actual, expected, rtol, what);                       \
    if (::cohort::test::report_measurements()) MESSAGE(cohort_cmp_.message);                                           \
    INFO(cohort_cmp_.message);                                                                                         \
    CHECK(cohort_cmp_.ok);                                                                                             \
  } while (0)

/// CHECK that two tensors agree to `rtol` of the expected tensor's largest magnitude.
#define COHORT_CHECK_CLOSE(actual, expected, rtol, what) COHORT_CHECK_CLOSE_ABS(actual, expected, rtol, 0.0, what)

/// The same with an absolute allowance added to the relative one.
#define COHORT_CHECK_CLOSE_ABS(actual, expected, rtol, atol, what)                                                     \
  do {                                                                                                                 \
    const auto cohort_cmp_ = ::cohort::test::compare(::cohort::test::const_span(actual),                               \
                                                     ::cohort::test::const_span(expected), rtol, what, atol);          \
    INFO(cohort_cmp_.message);                                                                                         \
    CHECK(cohort_cmp_.ok);                                                                                             \
  } while (0)
