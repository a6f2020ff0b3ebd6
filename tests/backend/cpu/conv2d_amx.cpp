// The AMX convolution (conv2d_amx.hpp: bf16 tiles, fp32 sums): its forward and dX kernels
// against exact sums within float rounding (tests/support/bf16_dot_conv.hpp, shared with the
// AVX512-BF16 kernels' tests in conv2d_avx512_bf16.cpp). And, on whichever bf16 dot-product
// engine cpu::bf16_dot_engine() picks (AMX or AVX512-BF16: the same layers, data and driver):
// dW and db through Conv2dKernels against exact sums (every dW block shape, odd and even tap
// offsets, batches cut into chunks, accumulation), the bf16 layer (plain and fused with ReLU +
// max-pool) against the float layer on the same rounded data, and the engine's choice. Each case
// is skipped, with a message, where the CPU lacks its engine.

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cohort/backend/cpu.hpp>
#include <cohort/backend/cpu/conv2d_amx.hpp>
#include <cohort/backend/cpu/conv2d_avx512_bf16.hpp>

#include "support/bf16_dot_conv.hpp"
#include "support/compare.hpp"
#include "support/skip.hpp"

using namespace cohort;
using namespace cohort::test::bf16_conv;

namespace {

constexpr const char* no_amx = "this CPU has no AMX-BF16, or the kernel did not grant the tile state";
constexpr const char* no_engine = "cpu::bf16_dot_engine() chose no bf16 dot-product engine on this CPU";

/// dW and db of the bf16 layer through Conv2dKernels (on bf16_dot_engine()) against exact
/// sums of the bf16 products; then again with `accumulate`, which must exactly double them (the
/// same sums in the same order).
template <class G>
void check_weight_grad(std::size_t batch) {
  INFO("geometry " << G::in_channels << "->" << G::out_channels << " " << G::in_h << "x" << G::in_w << " k" << G::kernel
                   << " p" << G::padding << " batch " << batch);
  std::mt19937 gen(unsigned(G::in_channels + G::out_channels * 17 + batch));
  const auto x = random_bf16(batch * G::in_size, gen), w = random_bf16(G::out_channels * G::patch, gen);
  const auto dy = random_bf16(batch * G::out_size, gen);
  CpuContext ctx;
  ops::Conv2dKernels<Cpu>::workspace<G, bfloat16> ws;
  std::vector<float> dw(w.size()), db(G::out_channels);
  ops::Conv2dKernels<Cpu>::backward<G>(
      ctx,
      ops::Conv2dBackwardArgs<bfloat16>{
          .x = x.data(), .w = w.data(), .dy = dy.data(), .dw = dw.data(), .db = db.data(), .batch = batch},
      ws);
  constexpr std::size_t K = G::kernel, P = G::padding;
  const double roundings = double(batch * G::out_h * G::out_w + 4);
  std::size_t wrong = 0;
  for (std::size_t o = 0; o < G::out_channels; ++o) {
    Sum sb;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t q = 0; q < G::out_h * G::out_w; ++q)
        sb.add(double(float(dy[(n * G::out_channels + o) * G::out_h * G::out_w + q])));
    wrong += !(std::abs(double(db[o]) - sb.sum) <= roundings * std::ldexp(sb.magnitude, -24));
    for (std::size_t c = 0; c < G::in_channels; ++c)
      for (std::size_t kh = 0; kh < K; ++kh)
        for (std::size_t kw = 0; kw < K; ++kw) {
          Sum s;
          for (std::size_t n = 0; n < batch; ++n)
            for (std::size_t oh = 0; oh < G::out_h; ++oh)
              for (std::size_t ow = 0; ow < G::out_w; ++ow) {
                const std::ptrdiff_t ih = std::ptrdiff_t(oh + kh) - std::ptrdiff_t(P),
                                     iw = std::ptrdiff_t(ow + kw) - std::ptrdiff_t(P);
                if (ih < 0 || iw < 0 || ih >= std::ptrdiff_t(G::in_h) || iw >= std::ptrdiff_t(G::in_w)) continue;
                s.add(double(float(dy[((n * G::out_channels + o) * G::out_h + oh) * G::out_w + ow])) *
                      double(float(x[n * G::in_size + (c * G::in_h + ih) * G::in_w + iw])));
              }
          const double got = dw[((o * G::in_channels + c) * K + kh) * K + kw];
          wrong += !(std::abs(got - s.sum) <= roundings * std::ldexp(s.magnitude, -24));
        }
  }
  CHECK(wrong == 0);
  std::vector<float> dw2 = dw, db2 = db;
  ops::Conv2dKernels<Cpu>::backward<G>(ctx,
                                       ops::Conv2dBackwardArgs<bfloat16>{.x = x.data(),
                                                                         .w = w.data(),
                                                                         .dy = dy.data(),
                                                                         .dw = dw2.data(),
                                                                         .db = db2.data(),
                                                                         .batch = batch,
                                                                         .accumulate = true},
                                       ws);
  std::size_t not_doubled = 0;
  for (std::size_t i = 0; i < dw.size(); ++i) not_doubled += dw2[i] != 2 * dw[i];
  for (std::size_t i = 0; i < db.size(); ++i) not_doubled += db2[i] != 2 * db[i];
  CHECK(not_doubled == 0);
}

/// The bf16 layer through Conv2dKernels (forward, dX and dW on bf16_dot_engine()) against the
/// float layer on the same bf16-rounded data: one bf16 rounding of the result apart, and dX, dW,
/// db close in norm.
template <class G>
void check_layer(std::size_t batch) {
  using PG = Pool2dGeometry<G::out_channels, G::out_h, G::out_w, 2, 2, 0>; // the fused pool
  using Kernels = ops::Conv2dKernels<Cpu>;
  static_assert(Kernels::fuses_relu_pool<G, PG, bfloat16>);
  INFO("geometry " << G::in_channels << "->" << G::out_channels << " " << G::in_h << "x" << G::in_w);
  std::mt19937 gen(7);
  const auto xh = random_bf16(batch * G::in_size, gen), wh = random_bf16(G::out_channels * G::patch, gen);
  const auto bh = random_bf16(G::out_channels, gen), dph = random_bf16(batch * PG::out_size, gen);
  const auto widen = [](const std::vector<bfloat16>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto xf = widen(xh), wf = widen(wh), bf = widen(bh), dpf = widen(dph);
  CpuContext ctx;
  Kernels::workspace<G, float> wsf;
  Kernels::workspace<G, bfloat16> wsh;
  // Plain forward.
  std::vector<float> yf(batch * G::out_size);
  std::vector<bfloat16> yh(yf.size());
  Kernels::forward<G>(ctx, xf.data(), wf.data(), bf.data(), yf.data(), batch, wsf);
  Kernels::forward<G>(ctx, xh.data(), wh.data(), bh.data(), yh.data(), batch, wsh);
  CHECK(test::relative_difference(widen(yh), yf) < std::ldexp(1.0, -8));
  // Fused Conv2d -> ReLU -> MaxPool2d<2> and its backward. Pool choices between values within a
  // rounding of each other may flip: compare the output elementwise, the gradients by norm.
  std::vector<float> pf(batch * PG::out_size), dxf(batch * G::in_size), dwf(wf.size()), dbf(bf.size());
  std::vector<bfloat16> ph(pf.size()), dxh(dxf.size());
  std::vector<float> dwh(dwf.size()), dbh(dbf.size());
  Kernels::forward_relu_pool<G, PG>(ctx, xf.data(), wf.data(), bf.data(), pf.data(), batch, wsf);
  Kernels::forward_relu_pool<G, PG>(ctx, xh.data(), wh.data(), bh.data(), ph.data(), batch, wsh);
  CHECK(test::relative_difference(widen(ph), pf) < std::ldexp(1.0, -8));
  Kernels::backward_relu_pool<G, PG>(ctx,
                                     ops::Conv2dReluPoolBackwardArgs<float>{.x = xf.data(),
                                                                            .w = wf.data(),
                                                                            .dpool = dpf.data(),
                                                                            .pooled = pf.data(),
                                                                            .dx = dxf.data(),
                                                                            .dw = dwf.data(),
                                                                            .db = dbf.data(),
                                                                            .batch = batch},
                                     wsf);
  Kernels::backward_relu_pool<G, PG>(ctx,
                                     ops::Conv2dReluPoolBackwardArgs<bfloat16>{.x = xh.data(),
                                                                               .w = wh.data(),
                                                                               .dpool = dph.data(),
                                                                               .pooled = ph.data(),
                                                                               .dx = dxh.data(),
                                                                               .dw = dwh.data(),
                                                                               .db = dbh.data(),
                                                                               .batch = batch},
                                     wsh);
  const auto norm_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, n = 1e-60;
    for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * double(a[i] - b[i]), n += double(b[i]) * b[i];
    return std::sqrt(d / n);
  };
  CHECK(norm_diff(widen(dxh), dxf) < 2e-2);
  CHECK(norm_diff(dwh, dwf) < 2e-2);
  CHECK(norm_diff(dbh, dbf) < 2e-2);
}

} // namespace

TEST_CASE("AMX convolution: which geometries run on tiles, and their blocks") {
  using cpu::amx_conv::Shape;
  CHECK_FALSE(cpu::amx_conv::applicable<Conv2dGeometry<1, 32, 28, 28, 3, 1, 1>>);  // nothing to pair
  CHECK_FALSE(cpu::amx_conv::applicable<Conv2dGeometry<6, 32, 28, 28, 3, 1, 1>>);  // blocks of 6: mostly empty tiles
  CHECK_FALSE(cpu::amx_conv::applicable<Conv2dGeometry<15, 32, 28, 28, 3, 1, 1>>); // odd
  CHECK_FALSE(cpu::amx_conv::applicable<Conv2dGeometry<16, 32, 28, 28, 3, 2, 1>>); // stride 2: im2col path
  CHECK(cpu::amx_conv::applicable<Conv2dGeometry<16, 32, 26, 26, 3, 1, 0>>);       // model A's second layer
  using D3 = Conv2dGeometry<256, 512, 7, 7, 3, 1, 1>;                              // model D's third
  CHECK(Shape<D3>::channel_block == 32);
  CHECK(Shape<D3>::blocks == 8);
  CHECK(Shape<Conv2dGeometry<48, 16, 7, 7, 3, 1, 1>>::channel_block == 24);
  CHECK(Shape<Conv2dGeometry<48, 16, 7, 7, 3, 1, 1>>::mb == 1);
  CHECK(Shape<Conv2dGeometry<48, 16, 7, 7, 3, 1, 1>>::nb == 3);
  CHECK(Shape<Conv2dGeometry<48, 40, 7, 7, 3, 1, 1>>::rows == 64);
}

namespace {

/// dW through Conv2dKernels on bf16_dot_engine(): 2x2 blocks, then 1x1 (16 -> 16), 1x2 and 2x1
/// with padded channels, odd and even tap offsets (Wp odd and even), batches cut into 1, 2 and 3
/// chunks.
void check_engine_weight_grad() {
  check_weight_grad<Conv2dGeometry<16, 32, 13, 13, 3, 1, 1>>(70);
  check_weight_grad<Conv2dGeometry<16, 16, 9, 9, 5, 1, 2>>(5); // Wp 11: odd offsets
  check_weight_grad<Conv2dGeometry<24, 12, 7, 6, 3, 1, 0>>(3);
  check_weight_grad<Conv2dGeometry<8, 40, 6, 7, 3, 1, 1>>(96);
}

} // namespace

TEST_CASE("bf16 dot convolution: the AMX kernels' forward and dX equal exact sums within float rounding") {
  if (!cpu::has_amx_bf16()) COHORT_SKIP(no_amx);
  check_engine_kernels(cpu::Bf16Dot::amx);
}

TEST_CASE("bf16 dot convolution: dW and db on the chosen engine equal exact sums within float rounding") {
  if (cpu::bf16_dot_engine() == cpu::Bf16Dot::none) COHORT_SKIP(no_engine);
  MESSAGE("engine: " << std::string(cpu::bf16_dot_name(cpu::bf16_dot_engine())));
  check_engine_weight_grad();
}

TEST_CASE("bf16 dot convolution: the bf16 layer is the float layer plus one rounding (plain and fused with pooling)") {
  if (cpu::bf16_dot_engine() == cpu::Bf16Dot::none) COHORT_SKIP(no_engine);
  check_layer<Conv2dGeometry<16, 32, 26, 26, 3, 1, 0>>(9);
  check_layer<Conv2dGeometry<32, 48, 14, 14, 3, 1, 1>>(5);
}
