#pragma once
// Tensor comparison for parity tests: max |a - b| <= rtol * max |b| over the tensor. Relative to
// the tensor's scale, not element by element: a gradient entry that is 1e-9 where its neighbours
// are 1 carries no information about correctness at float precision.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>

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

} // namespace cohort::test

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
