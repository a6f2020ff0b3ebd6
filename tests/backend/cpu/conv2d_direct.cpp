// The direct (wide-plane) convolution kernels against the double-precision im2col path, on
// geometries chosen to hit every edge: channel counts that are not multiples of the register
// tiles, all paddings a stride-1 kernel allows, 1x1 and 5x5 kernels, non-square images, a batch
// that is not a multiple of the sample blocks, a fused ReLU.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include <cohort/backend/cpu.hpp>

#include "support/compare.hpp"

using namespace cohort;

namespace {
template <class G>
void check_direct(std::size_t batch, bool relu) {
  static_assert(ops::Conv2dKernels<Cpu>::use_direct<G, float>, "the float path must be the direct one");
  CpuContext ctx;
  std::mt19937 gen(unsigned(G::in_channels * 131 + G::out_channels * 7 + G::kernel + G::padding));
  std::normal_distribution<float> normal;
  std::vector<float> x(batch * G::in_size), w(G::out_channels * G::patch), b(G::out_channels), dy(batch * G::out_size);
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = normal(gen);
  const auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  std::vector<double> xd = as_double(x), wd = as_double(w), bd = as_double(b), dyd = as_double(dy);

  // Reference in double through the im2col path, ReLU applied by hand.
  std::vector<double> yd(batch * G::out_size), dxd(batch * G::in_size), dwd(w.size()), dbd(b.size());
  ops::Conv2dKernels<Cpu>::workspace<G, double> wsd;
  ops::Conv2dKernels<Cpu>::forward<G>(ctx, xd.data(), wd.data(), bd.data(), yd.data(), batch, wsd);
  if (relu) {
    for (std::size_t i = 0; i < yd.size(); ++i) {
      if (yd[i] <= 0) dyd[i] = 0;
      yd[i] = std::max(yd[i], 0.0);
    }
  }
  ops::Conv2dKernels<Cpu>::backward<G>(ctx,
                                       ops::Conv2dBackwardArgs<double>{.x = xd.data(),
                                                                       .w = wd.data(),
                                                                       .dy = dyd.data(),
                                                                       .dx = dxd.data(),
                                                                       .dw = dwd.data(),
                                                                       .db = dbd.data(),
                                                                       .batch = batch},
                                       wsd);

  std::vector<float> y(yd.size()), dx(dxd.size()), dw(dwd.size()), db(dbd.size());
  ops::Conv2dKernels<Cpu>::workspace<G, float> ws;
  ops::Conv2dKernels<Cpu>::forward<G>(ctx, x.data(), w.data(), b.data(), y.data(), batch, ws, relu);
  ops::Conv2dKernels<Cpu>::backward<G>(ctx,
                                       ops::Conv2dBackwardArgs<float>{.x = x.data(),
                                                                      .w = w.data(),
                                                                      .dy = dy.data(),
                                                                      .dx = dx.data(),
                                                                      .dw = dw.data(),
                                                                      .db = db.data(),
                                                                      .batch = batch,
                                                                      .relu_y = relu ? y.data() : nullptr},
                                       ws);
  INFO("geometry " << G::in_channels << "->" << G::out_channels << " " << G::in_h << "x" << G::in_w << " k" << G::kernel
                   << " p" << G::padding << " batch " << batch << " relu " << relu);
  COHORT_CHECK_CLOSE(std::span<const float>(y), std::span<const double>(yd), 1e-5, "y");
  COHORT_CHECK_CLOSE(std::span<const float>(dx), std::span<const double>(dxd), 1e-5, "dx");
  COHORT_CHECK_CLOSE(std::span<const float>(dw), std::span<const double>(dwd), 1e-5, "dw");
  COHORT_CHECK_CLOSE(std::span<const float>(db), std::span<const double>(dbd), 1e-5, "db");
}
} // namespace

TEST_CASE("Direct convolution: matches the double im2col path on awkward geometries") {
  check_direct<Conv2dGeometry<3, 5, 9, 7, 3, 1, 1>>(5, false);
  check_direct<Conv2dGeometry<3, 5, 9, 7, 3, 1, 1>>(5, true);
  check_direct<Conv2dGeometry<1, 17, 11, 13, 5, 1, 2>>(3, true);
  check_direct<Conv2dGeometry<2, 3, 6, 6, 5, 1, 4>>(2, false); // padding K-1: dX has no padding at all
  check_direct<Conv2dGeometry<7, 9, 5, 8, 1, 1, 0>>(9, false);
  check_direct<Conv2dGeometry<13, 33, 7, 7, 3, 1, 0>>(11, true);
  check_direct<Conv2dGeometry<40, 24, 4, 4, 3, 1, 1>>(4, false); // many patch entries, few positions
  // Register tiles with partial blocks: 50 and 36 output channels (not multiples of 6, 8 or 16),
  // 80 (five vectors: a partial dW channel tile), a 7x7 kernel (dW rows split with a remainder).
  check_direct<Conv2dGeometry<3, 50, 10, 12, 7, 1, 3>>(3, true);
  check_direct<Conv2dGeometry<5, 80, 9, 9, 3, 1, 2>>(7, true);
  check_direct<Conv2dGeometry<2, 36, 15, 15, 3, 1, 1>>(37, false); // sample groups with a short last one
  check_direct<Conv2dGeometry<64, 96, 7, 7, 3, 1, 1>>(6, true);    // model D's small-plane shape, scaled
}

TEST_CASE("Strided direct convolution: matches the double im2col path on awkward geometries") {
  // ResNet's downsampling shapes (3x3 stride 2 and the 1x1 stride-2 projection), scaled down.
  check_direct<Conv2dGeometry<16, 32, 28, 28, 3, 2, 1>>(3, false);
  check_direct<Conv2dGeometry<16, 32, 28, 28, 1, 2, 0>>(3, false);
  // Odd sizes (the last phase row/column is short), every padding, a fused ReLU.
  check_direct<Conv2dGeometry<3, 5, 9, 7, 3, 2, 1>>(5, true);
  check_direct<Conv2dGeometry<3, 5, 9, 7, 3, 2, 0>>(5, false);
  check_direct<Conv2dGeometry<3, 5, 9, 7, 3, 2, 2>>(5, false);
  check_direct<Conv2dGeometry<2, 4, 11, 10, 5, 2, 2>>(3, true);
  check_direct<Conv2dGeometry<4, 8, 7, 6, 1, 2, 0>>(9, false);     // only phase (0, 0) is read
  check_direct<Conv2dGeometry<5, 80, 13, 12, 3, 3, 1>>(2, true);   // stride 3: 9 phases, 80 channels
  check_direct<Conv2dGeometry<6, 7, 10, 9, 2, 3, 1>>(3, false);    // kernel smaller than the stride
  check_direct<Conv2dGeometry<2, 36, 15, 15, 3, 2, 1>>(37, false); // sample groups with a short last one
}
