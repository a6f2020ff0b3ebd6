#pragma once
// The bf16 dot-product convolutions' kernel checks, shared by the AMX and the AVX512-BF16 test
// files (tests/backend/cpu/conv2d_amx.cpp, conv2d_avx512_bf16.cpp): both engines run the same
// layers on the same pair planes and packing, so one exact-sum check serves both.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <cohort/backend/cpu.hpp>
#include <cohort/backend/cpu/conv2d_amx.hpp>
#include <cohort/backend/cpu/conv2d_avx512_bf16.hpp>

namespace cohort::test::bf16_conv {

inline std::vector<bfloat16> random_bf16(std::size_t n, std::mt19937& gen) {
  std::normal_distribution<float> normal;
  std::vector<bfloat16> v(n);
  for (auto& e : v) e = bfloat16(normal(gen));
  return v;
}

/// Runs `engine`'s kernel of Gk over `batch` samples of Gk's input `in` with G's weights (Gk = G,
/// or the transposed geometry with `transpose_rotate`): the wide float outputs.
template <class G, class Gk>
std::vector<float> engine_run(cpu::Bf16Dot engine, const std::vector<bfloat16>& in, std::size_t batch,
                              const std::vector<bfloat16>& w, const std::vector<float>* bias, bool transpose_rotate) {
  using V = cpu::direct::Wide<Gk>;
  using S = cpu::amx_conv::Shape<Gk>;
  HostBuffer<bfloat16> packed;
  HostBuffer<float> tiles;
  cpu::amx_conv::pack_weights<G, Gk>(w.data(), packed, transpose_rotate);
  const float* b = bias ? cpu::amx_conv::bias_tiles<Gk>(bias->data(), tiles) : nullptr;
  std::vector<float> xf(Gk::in_size), xt(V::cin * V::plane);
  std::vector<std::uint32_t> pairs(batch * S::pair_planes * V::plane);
  for (std::size_t n = 0; n < batch; ++n) {
    for (std::size_t i = 0; i < Gk::in_size; ++i) xf[i] = float(in[n * Gk::in_size + i]);
    cpu::direct::pad_sample<Gk>(xf.data(), xt.data());
    cpu::amx_conv::pair_planes<Gk>(xt.data(), pairs.data() + n * S::pair_planes * V::plane);
  }
  std::vector<float> wide(batch * S::rows * V::positions, NAN);
  if (engine == cpu::Bf16Dot::amx)
    cpu::amx_conv::forward_samples<Gk>(pairs.data(), batch, packed.data(), b, wide.data());
  else
    cpu::avx512_bf16_conv::forward_samples<Gk>(pairs.data(), batch, packed.data(), b, wide.data());
  return wide;
}

/// Counts outputs farther from the exact sum than (terms + 1) float roundings of the sum of
/// magnitudes. `exact(n, o, h, w)` returns {sum, sum of |terms|}.
template <class Gk, class Exact>
std::size_t count_wrong(const std::vector<float>& wide, std::size_t batch, Exact&& exact) {
  using V = cpu::direct::Wide<Gk>;
  using S = cpu::amx_conv::Shape<Gk>;
  const double roundings = double(Gk::in_channels * V::taps + 1);
  std::size_t wrong = 0;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t o = 0; o < Gk::out_channels; ++o)
      for (std::size_t h = 0; h < V::ho; ++h)
        for (std::size_t w = 0; w < V::wo; ++w) {
          const auto [sum, magnitude] = exact(n, o, h, w);
          const double got = wide[(n * S::rows + o) * V::positions + h * V::wp + w];
          wrong += !(std::abs(got - sum) <= roundings * std::ldexp(magnitude, -24));
        }
  return wrong;
}

struct Sum {
  double sum = 0, magnitude = 0;
  void add(double t) { sum += t, magnitude += std::abs(t); }
};

template <class G>
void check_kernels(cpu::Bf16Dot engine, std::size_t batch) {
  using Gt = cpu::direct::transposed_geometry<G>;
  static_assert(cpu::amx_conv::applicable<G> && cpu::amx_conv::applicable<Gt>);
  INFO("geometry " << G::in_channels << "->" << G::out_channels << " " << G::in_h << "x" << G::in_w << " k" << G::kernel
                   << " p" << G::padding << " batch " << batch);
  std::mt19937 gen(unsigned(G::in_channels * 31 + G::out_channels + G::in_w));
  const auto x = random_bf16(batch * G::in_size, gen), w = random_bf16(G::out_channels * G::patch, gen);
  const auto dy = random_bf16(batch * G::out_size, gen);
  std::vector<float> bias(G::out_channels);
  for (auto& v : bias) v = float(bfloat16(std::normal_distribution<float>{}(gen)));
  constexpr std::size_t K = G::kernel, P = G::padding;
  const auto W = [&](std::size_t o, std::size_t c, std::size_t kh, std::size_t kw) {
    return double(float(w[((o * G::in_channels + c) * K + kh) * K + kw]));
  };

  const auto y = engine_run<G, G>(engine, x, batch, w, &bias, false);
  CHECK(count_wrong<G>(y, batch, [&](std::size_t n, std::size_t o, std::size_t h, std::size_t ow) {
          Sum s;
          s.add(bias[o]);
          for (std::size_t c = 0; c < G::in_channels; ++c)
            for (std::size_t kh = 0; kh < K; ++kh)
              for (std::size_t kw = 0; kw < K; ++kw) {
                const std::ptrdiff_t ih = std::ptrdiff_t(h + kh) - std::ptrdiff_t(P),
                                     iw = std::ptrdiff_t(ow + kw) - std::ptrdiff_t(P);
                if (ih < 0 || iw < 0 || ih >= std::ptrdiff_t(G::in_h) || iw >= std::ptrdiff_t(G::in_w)) continue;
                s.add(W(o, c, kh, kw) * double(float(x[n * G::in_size + (c * G::in_h + ih) * G::in_w + iw])));
              }
          return std::pair{s.sum, s.magnitude};
        }) == 0);

  const auto dx = engine_run<G, Gt>(engine, dy, batch, w, nullptr, true);
  CHECK(count_wrong<Gt>(dx, batch, [&](std::size_t n, std::size_t c, std::size_t ih, std::size_t iw) {
          Sum s;
          for (std::size_t o = 0; o < G::out_channels; ++o)
            for (std::size_t kh = 0; kh < K; ++kh)
              for (std::size_t kw = 0; kw < K; ++kw) {
                const std::ptrdiff_t oh = std::ptrdiff_t(ih + P) - std::ptrdiff_t(kh),
                                     ow = std::ptrdiff_t(iw + P) - std::ptrdiff_t(kw);
                if (oh < 0 || ow < 0 || oh >= std::ptrdiff_t(G::out_h) || ow >= std::ptrdiff_t(G::out_w)) continue;
                s.add(W(o, c, kh, kw) * double(float(dy[n * G::out_size + (o * G::out_h + oh) * G::out_w + ow])));
              }
          return std::pair{s.sum, s.magnitude};
        }) == 0);
}

/// Both engines' forward and dX kernels on geometries that hit every block shape.
inline void check_engine_kernels(cpu::Bf16Dot engine) {
  check_kernels<Conv2dGeometry<16, 32, 13, 13, 3, 1, 1>>(engine, 3); // 2x2 blocks; dX 1x3
  check_kernels<Conv2dGeometry<16, 32, 26, 26, 3, 1, 0>>(engine, 2); // model A: a 2x1 tail block
  check_kernels<Conv2dGeometry<24, 20, 9, 7, 5, 1, 2>>(engine, 3);   // blocks of 24 and 20 channels, Cout 20
  check_kernels<Conv2dGeometry<64, 16, 6, 13, 3, 1, 0>>(engine, 2);  // two channel blocks; 1x3 with a 1x1 tail
  check_kernels<Conv2dGeometry<32, 8, 8, 8, 3, 1, 1>>(engine, 3);    // 1x3 with a 1x2 tail; dX on blocks of 8
  check_kernels<Conv2dGeometry<48, 40, 7, 7, 3, 1, 1>>(engine, 2);   // Cout 40 and 48 in 64 rows
}

} // namespace cohort::test::bf16_conv
