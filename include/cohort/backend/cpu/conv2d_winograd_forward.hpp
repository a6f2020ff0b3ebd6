#pragma once
/// \file
/// Winograd forward (and dX) kernels (conv2d_winograd.hpp): input tiles B^T d B, the per-position
/// GEMMs, output tiles A^T m A, and one group of samples through them, per instruction set.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/tensor/buffer.hpp"

#include "cohort/backend/cpu/conv2d_winograd_choice.hpp"
#include "cohort/backend/cpu/conv2d_winograd_transform.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::winograd {

/// s + sum_k row[k] * v(k) over one row of a transform matrix: zeros skipped, ones not multiplied
/// (the rows are compile-time constants, so once the loops are unrolled no test is left).
template <int W, std::size_t K, class Value>
COHORT_ALWAYS_INLINE vec<W> combine(const std::array<float, K>& row, Value&& v, const vec<W>& init = vec<W>{}) {
  vec<W> s = init; // (by reference: a vector argument makes GCC print an ABI note without -march)
#pragma GCC unroll 8
  for (std::size_t k = 0; k < K; ++k)
    if (row[k] != 0.f) s += row[k] == 1.f ? v(k) : broadcast<W>(row[k]) * v(k);
  return s;
}

/// Where input_tiles stores channel c of tile t at position pos: pos * pos_stride + (c / nr) *
/// panel_stride + t * t_stride + c % nr. V of the forward pass is one panel of all channels,
/// (pos, t, c); the dW pass wants GEMM panels of nr channels, (pos, c / nr, t, c % nr).
struct TileLayout {
  std::size_t pos_stride, panel_stride, t_stride, nr;
};

/// B^T d B of every tile of one sample's channel-last input (tiles t0, t0 + 1, ...), with the
/// matrices of C (Coefficients: M x M tiles of P's output for the forward pass, R x R for dW).
template <int W, class P, class C>
COHORT_ALWAYS_INLINE void input_tiles(const float* __restrict xh, float* __restrict v, std::size_t t0,
                                      TileLayout layout) {
  constexpr std::size_t A = P::alpha, M = P::m;
  static_assert(C::alpha == A, "winograd::input_tiles: coefficients of another tile size");
  for (std::size_t ty = 0; ty < P::tiles_h; ++ty)
    for (std::size_t tx = 0; tx < P::tiles_w; ++tx) {
      const float* __restrict d = xh + (ty * M * P::in_cols + tx * M) * P::cin;
      float* __restrict out = v + (t0 + ty * P::tiles_w + tx) * layout.t_stride;
      for (std::size_t c = 0; c < P::cin; c += W) {
        float* __restrict at = out + c / layout.nr * layout.panel_stride + c % layout.nr;
        vec<W> tmp[A][A]; // B^T d
#pragma GCC unroll 8
        for (std::size_t j = 0; j < A; ++j) {
          vec<W> col[A];
#pragma GCC unroll 8
          for (std::size_t k = 0; k < A; ++k) col[k] = load<W>(d + (k * P::in_cols + j) * P::cin + c);
#pragma GCC unroll 8
          for (std::size_t i = 0; i < A; ++i) tmp[i][j] = combine<W>(C::bt[i], [&](std::size_t k) { return col[k]; });
        }
#pragma GCC unroll 8
        for (std::size_t i = 0; i < A; ++i)
#pragma GCC unroll 8
          for (std::size_t j = 0; j < A; ++j)
            store<W>(at + (i * A + j) * layout.pos_stride,
                     combine<W>(C::bt[j], [&](std::size_t k) { return tmp[i][k]; }));
      }
    }
}

/// One sample's channel-last output from M rows [t0, t0 + tiles): Y = A^T m A + bias.
template <int W, class P, std::size_t M>
COHORT_ALWAYS_INLINE void output_tiles(const float* __restrict m, const float* __restrict bias, float* __restrict yh,
                                       std::size_t t0, std::size_t rows) {
  using C = Coefficients<M, P::r>;
  constexpr std::size_t A = P::alpha, cols = P::tiles_w * M;
  const std::size_t pos_stride = rows * P::cout;
  for (std::size_t ty = 0; ty < P::tiles_h; ++ty)
    for (std::size_t tx = 0; tx < P::tiles_w; ++tx) {
      const float* __restrict in = m + (t0 + ty * P::tiles_w + tx) * P::cout;
      float* __restrict out = yh + (ty * M * cols + tx * M) * P::cout;
      for (std::size_t k = 0; k < P::cout; k += W) {
        vec<W> tmp[M][A]; // A^T m
#pragma GCC unroll 8
        for (std::size_t j = 0; j < A; ++j) {
          vec<W> col[A];
#pragma GCC unroll 8
          for (std::size_t l = 0; l < A; ++l) col[l] = load<W>(in + (l * A + j) * pos_stride + k);
#pragma GCC unroll 4
          for (std::size_t i = 0; i < M; ++i) tmp[i][j] = combine<W>(C::at[i], [&](std::size_t l) { return col[l]; });
        }
        const vec<W> b = bias ? load<W>(bias + k) : vec<W>{};
#pragma GCC unroll 4
        for (std::size_t i = 0; i < M; ++i)
#pragma GCC unroll 4
          for (std::size_t j = 0; j < M; ++j)
            store<W>(out + (i * cols + j) * P::cout + k, combine<W>(
                                                             C::at[j], [&](std::size_t l) { return tmp[i][l]; }, b));
      }
    }
}

/// M[pos] = V[pos] * U[pos] for every position: rows x P::cin times P::cin x P::cout.
template <int W, class P>
COHORT_ALWAYS_INLINE void multiply(const float* __restrict v, const float* __restrict u, float* __restrict m,
                                   std::size_t rows) {
  using S = detail::GemmShape<W>;
  constexpr int V = panel_vectors(W, P::cout);
  constexpr std::size_t nr = std::size_t(V) * W, panels = P::cout / nr;
  for (std::size_t pos = 0; pos < P::positions; ++pos) {
    const float* vp = v + pos * rows * P::cin;
    float* mp = m + pos * rows * P::cout;
    for (std::size_t p = 0; p < panels; ++p) {
      const float* up = u + (pos * panels + p) * P::cin * nr;
      for (std::size_t t = 0; t < rows; t += S::mr)
        detail::micro_kernel_for<W, V>(P::cin, vp + t * P::cin, P::cin, 1, up, mp + t * P::cout + p * nr, P::cout,
                                       std::min(S::mr, rows - t), nr, 1.f, 0.f);
    }
  }
}

/// Scratch of one group of `count` samples: the channel-last input and output of one sample,
/// V and M of the group.
template <class P>
struct GroupScratch {
  float *xh, *yh, *v, *m;
  static constexpr std::size_t floats(std::size_t count) noexcept {
    return P::in_size + P::out_size + P::positions * count * P::tiles * (P::cin + P::cout);
  }
  GroupScratch(float* base, std::size_t count) noexcept
      : xh(base), yh(base + P::in_size), v(yh + P::out_size), m(v + P::positions * count * P::tiles * P::cin) {}
};

/// The convolution Gk of samples first .. first + count, with output tiles of M x M:
/// `pad(n, xt)` fills sample n's wide planes at `xt` (Wide::cin x Wide::plane floats),
/// `unpad(n, yw)` takes its wide output (Gk::out_channels x Wide::positions, 32 floats of slack).
/// `u` from pack_weights for width W; `bias` (float, P::cout of them) or null.
template <int W, class Gk, std::size_t M, class Pad, class Unpad>
COHORT_ALWAYS_INLINE void run_group(std::size_t first, std::size_t count, const float* u, const float* bias,
                                    float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {
  using P = Plan<Gk, M>;
  const GroupScratch<P> s(scratch, count);
  const std::size_t rows = count * P::tiles;
  for (std::size_t i = 0; i < count; ++i) {
    pad(first + i, xt);
    to_channels_last<P>(xt, s.xh);
    input_tiles<W, P, Coefficients<M, P::r>>(s.xh, s.v, i * P::tiles, {rows * P::cin, 0, P::cin, P::cin});
  }
  multiply<W, P>(s.v, u, s.m, rows);
  for (std::size_t i = 0; i < count; ++i) {
    output_tiles<W, P, M>(s.m, bias, s.yh, i * P::tiles, rows);
    to_wide<P, Gk>(s.yh, yw);
    unpad(first + i, static_cast<const float*>(yw));
  }
}

#define COHORT_WINOGRAD_ENTRY(SUFFIX, TARGET, WIDTH)                                                                   \
  template <class Gk, std::size_t M, class Pad, class Unpad>                                                           \
  TARGET void run_group_##SUFFIX(std::size_t first, std::size_t count, const float* u, const float* bias,              \
                                 float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {                       \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    run_group<WIDTH, Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad);                                       \
  }
COHORT_WINOGRAD_ENTRY(avx512, COHORT_TARGET_AVX512, 16)
COHORT_WINOGRAD_ENTRY(avx2, COHORT_TARGET_AVX2, 8)
COHORT_WINOGRAD_ENTRY(generic, , 4)
#undef COHORT_WINOGRAD_ENTRY

/// run_group on the instruction set `isa` (the one `u` was packed for).
template <class Gk, std::size_t M, class Pad, class Unpad>
void run_group_dispatch(Isa isa, std::size_t first, std::size_t count, const float* u, const float* bias,
                        float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {
  dispatch_compiled<Gk, M>(
      isa, [&] { run_group_avx512<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); },
      [&] { run_group_avx2<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); },
      [&] { run_group_generic<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); });
}

} // namespace cohort::cpu::winograd

#pragma GCC diagnostic pop
