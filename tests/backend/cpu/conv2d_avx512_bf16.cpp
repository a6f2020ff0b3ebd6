// The AVX512-BF16 convolution (conv2d_avx512_bf16.hpp: VDPBF16PS vectors, fp32 sums, on the AMX
// path's pair planes and packing): its forward and dX kernels against exact sums within float
// rounding on geometries that hit every tile shape, and its forward kernel bit for bit against
// VDPBF16PS's scalar model (cpu::bf16_dot_reference) in the kernel's order. dW, db and the layer
// through Conv2dKernels run on whichever engine the CPU picks: conv2d_amx.cpp. Skipped, with a
// message, where the CPU has no AVX512-BF16.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include <cohort/backend/cpu.hpp>
#include <cohort/backend/cpu/conv2d_avx512_bf16.hpp>

#include "support/bf16_dot_conv.hpp"
#include "support/skip.hpp"

using namespace cohort;
using namespace cohort::test::bf16_conv;

namespace {
constexpr const char* no_avx512_bf16 = "this CPU has no AVX512-BF16 (or COHORT_ISA turned AVX-512 off)";
} // namespace

TEST_CASE("bf16 dot convolution: the AVX512-BF16 kernels' forward and dX equal exact sums within float rounding") {
  if (!cpu::has_avx512_bf16()) COHORT_SKIP(no_avx512_bf16);
  check_engine_kernels(cpu::Bf16Dot::avx512);
}

TEST_CASE("bf16 dot convolution: the AVX512-BF16 forward kernel equals VDPBF16PS's scalar model bit for bit") {
  if (!cpu::has_avx512_bf16()) COHORT_SKIP(no_avx512_bf16);
  // Taps in order, then channel pairs in order; each pair adds its odd product, then its even
  // one (cpu::bf16_dot_reference's rule), from the bias.
  using G = Conv2dGeometry<32, 24, 9, 11, 3, 1, 1>;
  using V = cpu::direct::Wide<G>;
  using S = cpu::amx_conv::Shape<G>;
  constexpr std::size_t batch = 2, K = G::kernel, P = G::padding;
  std::mt19937 gen(11);
  const auto x = random_bf16(batch * G::in_size, gen), w = random_bf16(G::out_channels * G::patch, gen);
  std::vector<float> bias(G::out_channels);
  for (auto& v : bias) v = float(bfloat16(std::normal_distribution<float>{}(gen)));
  const auto y = engine_run<G, G>(cpu::Bf16Dot::avx512, x, batch, w, &bias, false);
  std::size_t differ = 0;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t o = 0; o < G::out_channels; ++o)
      for (std::size_t h = 0; h < V::ho; ++h)
        for (std::size_t ow = 0; ow < V::wo; ++ow) {
          float acc = bias[o];
          for (std::size_t t = 0; t < K * K; ++t) {
            const std::ptrdiff_t ih = std::ptrdiff_t(h + t / K) - std::ptrdiff_t(P),
                                 iw = std::ptrdiff_t(ow + t % K) - std::ptrdiff_t(P);
            const bool inside = ih >= 0 && iw >= 0 && ih < std::ptrdiff_t(G::in_h) && iw < std::ptrdiff_t(G::in_w);
            bfloat16 xs[G::in_channels], ws[G::in_channels];
            for (std::size_t c = 0; c < G::in_channels; ++c) {
              xs[c] =
                  inside ? x[n * G::in_size + (c * G::in_h + std::size_t(ih)) * G::in_w + std::size_t(iw)] : bfloat16{};
              ws[c] = w[(o * G::in_channels + c) * K * K + t];
            }
            acc = cpu::bf16_dot_reference(acc, ws, xs, G::in_channels, 1);
          }
          const float got = y[(n * S::rows + o) * V::positions + h * V::wp + ow];
          differ += std::memcmp(&got, &acc, sizeof acc) != 0;
        }
  CHECK(differ == 0);
}
