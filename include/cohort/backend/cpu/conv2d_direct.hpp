#pragma once
/// \file
/// Direct convolution for stride 1 on "wide" planes: no im2col matrix, no scatter.
///
/// A (C, H, W) sample is copied once into zero-padded planes of row stride Wp = W + 2P. Output
/// position (h, w) then reads input (h + kh, w + kw) at flat offset p + kh*Wp + kw with
/// p = h*Wp + w: every tap of the kernel is a *contiguous shifted row* of the same plane. The
/// kernel computes all p in [0, Ho*Wp) — the columns w >= Wo are garbage and dropped — so a
/// convolution becomes a GEMM whose B operand is read straight from the padded planes:
///
///   forward   out[o][p]  = b[o] + sum_{c,kh,kw} W[o][c][kh][kw] * X[c][p + kh*Wp + kw]
///   dX        the same with dY padded by K-1-P and W rotated and transposed (a "full" conv)
///   dW        dW[o][c,kh,kw] = sum_n sum_p dY[n][o][p] * X[n][c][p + kh*Wp + kw], dY zero in
///             the garbage columns
///
/// Register tiles: forward/dX keep MR output channels x 2 vectors of positions in registers
/// over the whole c,kh,kw reduction; dW keeps 4 x 4 (channel, tap) vector accumulators over all
/// samples and positions and sums their lanes once, in a fixed order. Work is split between
/// threads by sample (forward, dX) or by output tile (dW): every output element is computed by one
/// thread in one order, so results do not depend on the thread count.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cohort/backend/cpu/conv2d_direct_kernels.hpp"
#include "cohort/backend/cpu/conv2d_direct_plan.hpp"
#include "cohort/backend/cpu/relu_pool.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/tensor/buffer.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::direct {

#define COHORT_DIRECT_ENTRIES(SUFFIX, TARGET, WIDTH)                                                                   \
  template <class G>                                                                                                   \
  TARGET void forward_samples_##SUFFIX(const float* xt, std::size_t count, const float* wpk, const float* bias,        \
                                       float* yw) {                                                                    \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    forward_samples<WIDTH, G>(xt, count, wpk, bias, yw);                                                               \
  }                                                                                                                    \
  template <class G>                                                                                                   \
  TARGET void weight_grad_tile_##SUFFIX(const float* xt, const float* dyt, std::size_t nb, std::size_t t, float* dwt,  \
                                        bool first) {                                                                  \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    weight_grad_tile<WIDTH, G>(xt, dyt, nb, t, dwt, first);                                                            \
  }                                                                                                                    \
  template <class G>                                                                                                   \
  TARGET void weight_grad_channel_##SUFFIX(const float* xt, const float* dyw, std::size_t nb, float* acc) {            \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    weight_grad_channel<WIDTH, G>(xt, dyw, nb, acc);                                                                   \
  }                                                                                                                    \
  template <class G>                                                                                                   \
  TARGET void pool_wide_##SUFFIX(const float* yw, float* y, std::uint8_t* win) {                                       \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    pool_wide<WIDTH, G>(yw, y, win);                                                                                   \
  }
COHORT_DIRECT_ENTRIES(avx512, COHORT_TARGET_AVX512, 16)
COHORT_DIRECT_ENTRIES(avx2, COHORT_TARGET_AVX2, 8)
COHORT_DIRECT_ENTRIES(generic, , 4)
#undef COHORT_DIRECT_ENTRIES

inline int width(Isa isa) noexcept { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4; }

template <class G>
void forward_samples_dispatch(Isa isa, const float* xt, std::size_t count, const float* wpk, const float* bias,
                              float* yw) {
  dispatch_isa(
      isa, [&] { forward_samples_avx512<G>(xt, count, wpk, bias, yw); },
      [&] { forward_samples_avx2<G>(xt, count, wpk, bias, yw); },
      [&] { forward_samples_generic<G>(xt, count, wpk, bias, yw); });
}
template <class G>
void weight_grad_tile_dispatch(Isa isa, const float* xt, const float* dyt, std::size_t nb, std::size_t t, float* dwt,
                               bool first) {
  dispatch_isa(
      isa, [&] { weight_grad_tile_avx512<G>(xt, dyt, nb, t, dwt, first); },
      [&] { weight_grad_tile_avx2<G>(xt, dyt, nb, t, dwt, first); },
      [&] { weight_grad_tile_generic<G>(xt, dyt, nb, t, dwt, first); });
}

template <class G>
void weight_grad_channel_dispatch(Isa isa, const float* xt, const float* dyw, std::size_t nb, float* acc) {
  dispatch_isa(
      isa, [&] { weight_grad_channel_avx512<G>(xt, dyw, nb, acc); },
      [&] { weight_grad_channel_avx2<G>(xt, dyw, nb, acc); },
      [&] { weight_grad_channel_generic<G>(xt, dyw, nb, acc); });
}
template <class G>
void pool_wide_dispatch(Isa isa, const float* yw, float* y, std::uint8_t* win) {
  dispatch_isa(
      isa, [&] { pool_wide_avx512<G>(yw, y, win); }, [&] { pool_wide_avx2<G>(yw, y, win); },
      [&] { pool_wide_generic<G>(yw, y, win); });
}

/// The dW kernel's tile count and channel padding for an instruction set.
struct WeightGradShape {
  std::size_t tiles, padded_cout;
};
template <class G>
WeightGradShape weight_grad_shape(Isa isa) noexcept {
  if (isa == Isa::avx512) return {WeightGradTile<16, G>::count, padded_cout<G, 16>};
  if (isa == Isa::avx2) return {WeightGradTile<8, G>::count, padded_cout<G, 8>};
  return {WeightGradTile<4, G>::count, padded_cout<G, 4>};
}

/// db[o] (+)= sum over samples and positions of dYt[n][q][o], vectorised over channels: each
/// channel is one lane summed in (n, q) order, so the result is reproducible.
template <int W>
COHORT_ALWAYS_INLINE void bias_grad_impl(const float* __restrict dyt, std::size_t rows, std::size_t padded,
                                         std::size_t cout, float* __restrict db, bool accumulate) {
  // Up to 8 channel vectors per pass over the rows: contiguous reads and 8 independent sums.
  constexpr std::size_t chunk = 8 * W;
  for (std::size_t c0 = 0; c0 < padded; c0 += chunk) {
    const std::size_t nv = std::min(chunk, padded - c0) / W;
    vec<W> acc[8] = {};
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = dyt + r * padded + c0;
#pragma GCC unroll 32
      for (std::size_t v = 0; v < 8; ++v)
        if (v < nv) acc[v] += load<W>(row + v * W);
    }
#pragma GCC unroll 32
    for (std::size_t v = 0; v < 8; ++v) { // (v < nv tested inside: a run-time index keeps acc in memory)
      if (v >= nv) continue;
      float lanes[W];
      __builtin_memcpy(lanes, &acc[v], sizeof acc[v]);
      for (std::size_t l = 0; l < std::size_t(W) && c0 + v * W + l < cout; ++l) {
        const std::size_t o = c0 + v * W + l;
        db[o] = accumulate ? db[o] + lanes[l] : lanes[l];
      }
    }
  }
}
COHORT_TARGET_AVX512 inline void bias_grad_avx512(const float* dyt, std::size_t rows, std::size_t padded,
                                                  std::size_t cout, float* db, bool accumulate) {
  COHORT_ISA_ENTRY(Isa::avx512);
  bias_grad_impl<16>(dyt, rows, padded, cout, db, accumulate);
}
COHORT_TARGET_AVX2 inline void bias_grad_avx2(const float* dyt, std::size_t rows, std::size_t padded, std::size_t cout,
                                              float* db, bool accumulate) {
  COHORT_ISA_ENTRY(Isa::avx2);
  bias_grad_impl<8>(dyt, rows, padded, cout, db, accumulate);
}
inline void bias_grad(Isa isa, const float* dyt, std::size_t rows, std::size_t padded, std::size_t cout, float* db,
                      bool accumulate) {
  if (isa == Isa::avx512)
    bias_grad_avx512(dyt, rows, padded, cout, db, accumulate);
  else if (isa == Isa::avx2)
    bias_grad_avx2(dyt, rows, padded, cout, db, accumulate);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    bias_grad_impl<4>(dyt, rows, padded, cout, db, accumulate);
  }
}

/// dYt[q][o] = dY[o][q] for one sample: valid positions x output channels (padded with zeros).
/// With `relu_of`, dY is first masked by relu_of > 0 (a fused ReLU's gradient).
template <class G, bool Vector>
COHORT_ALWAYS_INLINE void transpose_dy_impl(const float* __restrict dy, float* __restrict dyt, std::size_t padded,
                                            const float* __restrict relu_of) {

  constexpr std::size_t positions = G::out_h * G::out_w, cout = G::out_channels;
  std::size_t o0 = 0;
  if constexpr (Vector) {
    for (; o0 + 8 <= cout; o0 += 8) {
      std::size_t q = 0;
      for (; q + 8 <= positions; q += 8)
        transpose8x8(dy + o0 * positions + q, positions, dyt + q * padded + o0, padded,
                     relu_of ? relu_of + o0 * positions + q : nullptr);
      for (; q < positions; ++q)
        for (std::size_t o = o0; o < o0 + 8; ++o)
          dyt[q * padded + o] = !relu_of || relu_of[o * positions + q] > 0.f ? dy[o * positions + q] : 0.f;
    }
  }
  // Channels not covered by 8x8 blocks, and the zero padding up to `padded`.
  for (std::size_t q = 0; q < positions; ++q)
    for (std::size_t o = o0; o < padded; ++o)
      dyt[q * padded + o] = o < cout && (!relu_of || relu_of[o * positions + q] > 0.f) ? dy[o * positions + q] : 0.f;
}
template <class G>
COHORT_TARGET_AVX2 void transpose_dy_avx2(const float* dy, float* dyt, std::size_t padded, const float* relu_of) {
  COHORT_ISA_ENTRY(Isa::avx2); // also the AVX-512 path's transpose (8x8 blocks)
  transpose_dy_impl<G, true>(dy, dyt, padded, relu_of);
}
template <class G>
void transpose_dy(const float* dy, float* dyt, std::size_t padded, const float* relu_of = nullptr) {
  const auto vector = [&] { transpose_dy_avx2<G>(dy, dyt, padded, relu_of); };
  dispatch_isa(active_isa(), vector, vector, [&] { transpose_dy_impl<G, false>(dy, dyt, padded, relu_of); });
}

/// Output rows of the forward kernel's blocks (Cout rounded up to the tile's MR) for an
/// instruction set: the row count of the wide output buffer.
template <class Gk>
std::size_t forward_rows(Isa isa) noexcept {
  const std::size_t mr = isa == Isa::avx512 ? ForwardTile<16, Gk>::mr
                         : isa == Isa::avx2 ? ForwardTile<8, Gk>::mr
                                            : ForwardTile<4, Gk>::mr;
  return round_up(plan_t<Gk>::cout, mr);
}

/// Packs the weights of G for the forward kernel of Gk on an instruction set: Gk = G for the
/// forward pass, Gk = transposed_geometry<G> with `transpose_rotate` for dX.
template <class G, class Gk, class T>
void pack_for(Isa isa, const T* w, HostBuffer<float>& out, bool transpose_rotate) {
  out.resize(forward_rows<Gk>(isa) * Gk::in_channels * Gk::kernel * Gk::kernel);
  dispatch_isa(
      isa, [&] { pack_weights<G, ForwardTile<16, Gk>::mr>(w, out.data(), transpose_rotate); },
      [&] { pack_weights<G, ForwardTile<8, Gk>::mr>(w, out.data(), transpose_rotate); },
      [&] { pack_weights<G, ForwardTile<4, Gk>::mr>(w, out.data(), transpose_rotate); });
}

/// Copies the valid columns of a wide output (rows x Wide::positions) into (rows, ho, wo),
/// applying max(., 0) when a following ReLU is fused.
template <class G>
void unwiden(const float* __restrict yw, float* __restrict y, std::size_t rows, bool relu = false) {
  using V = plan_t<G>;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t h = 0; h < V::ho; ++h) {
      const float* __restrict in = yw + r * V::positions + h * V::wp;
      float* __restrict out = y + (r * V::ho + h) * V::wo;
      if (relu)
        for (std::size_t w = 0; w < V::wo; ++w) out[w] = in[w] > 0.f ? in[w] : 0.f;
      else
        std::memcpy(out, in, V::wo * sizeof(float));
    }
}

/// The dX convolution of a stride-1 Conv2d G: a forward convolution of dY (Cout, Ho, Wo) padded
/// by K-1-P, with Cin outputs.
template <class G>
using transposed_geometry =
    Conv2dGeometry<G::out_channels, G::in_channels, G::out_h, G::out_w, G::kernel, 1, G::kernel - 1 - G::padding>;

} // namespace cohort::cpu::direct

#pragma GCC diagnostic pop
