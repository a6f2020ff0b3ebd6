// The pointwise path (backend/cpu/conv2d_pointwise.hpp): float 1x1 convolutions against their
// definition in double, with a bias, a fused ReLU and accumulated gradients, on planes whose size
// is and is not a multiple of each vector width, through both weight-gradient kernels (the direct
// path's below 256 positions, its own from there); and the same bits on 1, 2 and 3 threads. The
// suite's isa.avx2 / isa.generic reruns take the 8- and 4-lane paths.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <cohort/backend/cpu.hpp>

#include "support/compare.hpp"

using namespace cohort;

namespace {

CpuContext& ctx() {
  static CpuContext c;
  return c;
}

struct PointwiseCase {
  std::vector<float> x, w, b, dy;
};

template <class G>
PointwiseCase pointwise_case(std::size_t batch) {
  PointwiseCase c{std::vector<float>(batch * G::in_size), std::vector<float>(G::out_channels * G::in_channels),
                  std::vector<float>(G::out_channels), std::vector<float>(batch * G::out_size)};
  for (std::size_t i = 0; i < c.x.size(); ++i) c.x[i] = std::sin(float(i) * 0.37f) * 1.5f;
  for (std::size_t i = 0; i < c.w.size(); ++i) c.w[i] = std::cos(float(i) * 0.91f) * 0.4f;
  for (std::size_t i = 0; i < c.b.size(); ++i) c.b[i] = 0.1f * float(i % 5) - 0.2f;
  for (std::size_t i = 0; i < c.dy.size(); ++i) c.dy[i] = std::sin(float(i) * 0.53f + 1.f);
  return c;
}

/// The largest |got - want| over the largest |want|.
double relative(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, top = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - want[i]));
    top = std::max(top, std::abs(want[i]));
  }
  return diff / std::max(top, 1e-30);
}

// Measured (Sapphire Rapids, relative to each tensor's largest value): at most 3.4e-7 forward,
// 2.3e-7 dX, 8.7e-7 / 1.5e-6 / 1.9e-6 dW (AVX-512 / AVX2 / generic) and 3.4e-6 db (sums over
// batch x positions): float rounding. A misplaced or missing term moves a tensor by 1e-2 or more.
constexpr double bound = 1e-5;

template <class G>
void check_against_definition(std::size_t batch) {
  using K = ops::Conv2dKernels<Cpu>;
  static_assert(K::use_pointwise<G, float>, "the case must take the pointwise path");
  constexpr std::size_t in_c = G::in_channels, out_c = G::out_channels, p = G::out_plane;
  const PointwiseCase c = pointwise_case<G>(batch);
  for (bool relu : {false, true}) {
    CAPTURE(relu);
    // The definition, in double.
    std::vector<double> y(batch * G::out_size), dx(batch * G::in_size, 0.0), dw(out_c * in_c, 0.5), db(out_c, 0.25);
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t o = 0; o < out_c; ++o)
        for (std::size_t q = 0; q < p; ++q) {
          double s = c.b[o];
          for (std::size_t i = 0; i < in_c; ++i) s += double(c.w[o * in_c + i]) * c.x[(n * in_c + i) * p + q];
          y[(n * out_c + o) * p + q] = relu ? std::max(s, 0.0) : s;
        }
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t o = 0; o < out_c; ++o)
        for (std::size_t q = 0; q < p; ++q) {
          const std::size_t at = (n * out_c + o) * p + q;
          const double g = relu && !(y[at] > 0) ? 0.0 : c.dy[at];
          db[o] += g;
          for (std::size_t i = 0; i < in_c; ++i) {
            dw[o * in_c + i] += g * c.x[(n * in_c + i) * p + q];
            dx[(n * in_c + i) * p + q] += g * c.w[o * in_c + i];
          }
        }
    // The kernels: forward, then backward accumulating onto 0.5 / 0.25.
    K::workspace<G, float> ws;
    std::vector<float> yk(batch * G::out_size), dxk(batch * G::in_size), dwk(out_c * in_c, 0.5f), dbk(out_c, 0.25f);
    K::forward<G>(ctx(), c.x.data(), c.w.data(), c.b.data(), yk.data(), batch, ws, relu);
    K::backward<G>(ctx(),
                   ops::Conv2dBackwardArgs<float>{.x = c.x.data(),
                                                  .w = c.w.data(),
                                                  .dy = c.dy.data(),
                                                  .dx = dxk.data(),
                                                  .dw = dwk.data(),
                                                  .db = dbk.data(),
                                                  .batch = batch,
                                                  .accumulate = true,
                                                  .relu_y = relu ? yk.data() : nullptr},
                   ws);
    if (test::report_measurements())
      MESSAGE("positions " << p << ": y " << relative(yk, y) << ", dx " << relative(dxk, dx) << ", dw "
                           << relative(dwk, dw) << ", db " << relative(dbk, db));
    CHECK(relative(yk, y) < bound);
    CHECK(relative(dxk, dx) < bound);
    CHECK(relative(dwk, dw) < bound);
    CHECK(relative(dbk, db) < bound);
  }
}

} // namespace

TEST_CASE("Conv2d pointwise path: 1x1 layers match their definition (bias, fused ReLU, accumulation, plane tails)") {
  check_against_definition<Conv2dGeometry<5, 7, 5, 5, 1, 1, 0>>(6);    // 25 positions: a partial vector
  check_against_definition<Conv2dGeometry<3, 10, 4, 4, 1, 1, 0>>(4);   // 16: one AVX-512 vector exactly
  check_against_definition<Conv2dGeometry<20, 12, 7, 7, 1, 1, 0>>(5);  // 49: three vectors and one lane
  check_against_definition<Conv2dGeometry<9, 13, 16, 16, 1, 1, 0>>(5); // 256: the path's own dW
  check_against_definition<Conv2dGeometry<17, 6, 17, 17, 1, 1, 0>>(3); // 289: its own dW, a one-lane tail
  check_against_definition<Conv2dGeometry<4, 20, 17, 16, 1, 1, 0>>(9); // 272: rows past the 8-row tiles
}

TEST_CASE("Conv2d pointwise path: 1, 2 and 3 threads give bitwise the same output and gradients") {
  using G = Conv2dGeometry<24, 40, 16, 17, 1, 1, 0>; // its own dW (272 positions)
  using K = ops::Conv2dKernels<Cpu>;
  constexpr std::size_t batch = 21;
  const PointwiseCase c = pointwise_case<G>(batch);
  std::vector<float> first;
  for (std::size_t threads : {1, 2, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    CpuContext local;
    K::workspace<G, float> ws;
    std::vector<float> y(batch * G::out_size), dx(batch * G::in_size), dw(40 * 24), db(40);
    K::forward<G>(local, c.x.data(), c.w.data(), c.b.data(), y.data(), batch, ws, false);
    K::backward<G>(local,
                   ops::Conv2dBackwardArgs<float>{.x = c.x.data(),
                                                  .w = c.w.data(),
                                                  .dy = c.dy.data(),
                                                  .dx = dx.data(),
                                                  .dw = dw.data(),
                                                  .db = db.data(),
                                                  .batch = batch},
                   ws);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), db.begin(), db.end());
    if (first.empty())
      first = y;
    else
      CHECK(y == first);
  }
  set_num_threads(1);
}
