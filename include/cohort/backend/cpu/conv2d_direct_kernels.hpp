#pragma once
/// \file
/// The direct convolution's register-tile kernels (conv2d_direct.hpp), written once for any
/// vector width W: forward/dX tiles with their weight packing, the dW tiles, the per-channel dW
/// kernel of one-channel inputs, and the fused ReLU + 2x2 max-pool of a wide output.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cohort/backend/cpu/relu_pool.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/tensor/buffer.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#include "cohort/backend/cpu/conv2d_direct_plan.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::direct {

/// Register tile of the forward/dX kernel: `mr` output channels x `nv` vectors of positions.
/// Loads per FMA are (mr + nv) / (mr * nv); rows past Cout (padding of the last block) are
/// wasted work. The choice minimises both within the accumulators the instruction set has
/// (24 of 32 zmm registers, 12 of 16 ymm/xmm).
template <int W, class G>
struct ForwardTile {
  struct Choice {
    std::size_t mr, nv;
  };
  static constexpr Choice choose() {
    constexpr Choice wide[] = {{8, 3}, {6, 4}, {12, 2}, {8, 2}};
    constexpr Choice narrow[] = {{6, 2}, {4, 3}, {3, 4}};
    const std::size_t cout = plan_t<G>::cout, n = W == 16 ? 4 : 3;
    Choice best{};
    double best_cost = 1e9;
    for (std::size_t i = 0; i < n; ++i) {
      const Choice c = W == 16 ? wide[i] : narrow[i];
      const double waste = double(round_up(cout, c.mr)) / double(cout);
      const double cost = double(c.mr + c.nv) / double(c.mr * c.nv) * waste + waste; // loads + FMAs per useful FMA
      if (cost < best_cost - 1e-12) best_cost = cost, best = c;
    }
    return best;
  }
  static constexpr std::size_t mr = choose().mr, nv = choose().nv;
  static constexpr std::size_t blocks = (plan_t<G>::cout + mr - 1) / mr;
};

/// Packs W (out, in, K, K) into blocks of MR output channels: [block][c][tap][r], zero-padded.
/// `transpose_rotate` packs the weights of the dX convolution instead: W'[c][o][K-1-kh][K-1-kw].
template <class G, std::size_t MR, class T = float>
void pack_weights(const T* __restrict w, float* __restrict out, bool transpose_rotate) {
  constexpr std::size_t K = G::kernel, taps = K * K;
  const std::size_t rows = transpose_rotate ? G::in_channels : G::out_channels;
  const std::size_t depth = transpose_rotate ? G::out_channels : G::in_channels;
  const std::size_t blocks = (rows + MR - 1) / MR;
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t c = 0; c < depth; ++c)
      for (std::size_t t = 0; t < taps; ++t)
        for (std::size_t r = 0; r < MR; ++r) {
          const std::size_t row = b * MR + r;
          float v = 0.f;
          if (row < rows) {
            v = float(transpose_rotate ? w[((c * G::in_channels + row) * taps) + (taps - 1 - t)]
                                       : w[(row * G::in_channels + c) * taps + t]);
          }
          out[((b * depth + c) * taps + t) * MR + r] = v;
        }
}

/// MR output channels x NV vectors of wide positions from p0, over the whole (c, tap) reduction.
template <int W, class G, std::size_t MR, std::size_t NV>
COHORT_ALWAYS_INLINE void forward_tile(const float* __restrict xt, const float* __restrict wb,
                                       const float* __restrict bias, std::size_t row0, std::size_t p0,
                                       float* __restrict yw) {
  using V = plan_t<G>;
  vec<W> acc[MR][NV];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) {
    const vec<W> init = broadcast<W>(bias && row0 + r < V::cout ? bias[row0 + r] : 0.f);
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NV; ++v) acc[r][v] = init;
  }
  for (std::size_t c = 0; c < V::cin; ++c) {
    const float* __restrict xc = xt + c * V::channel_stride + p0;
    const float* __restrict wc = wb + c * V::taps * MR;
#pragma GCC unroll 25
    for (std::size_t t = 0; t < V::taps; ++t) {
      // A compiler barrier per tap: GCC would otherwise hoist the next taps' loads and spill
      // accumulators to make room for them.
      asm volatile("" ::: "memory");
      const float* __restrict xs = xc + V::offset(t);
      vec<W> x[NV];
#pragma GCC unroll 32
      for (std::size_t v = 0; v < NV; ++v) x[v] = load<W>(xs + v * W);
#pragma GCC unroll 12
      for (std::size_t r = 0; r < MR; ++r) {
        const vec<W> wv = broadcast<W>(wc[t * MR + r]);
#pragma GCC unroll 32
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] += wv * x[v];
      }
    }
  }
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NV; ++v) store<W>(yw + (row0 + r) * V::positions + p0 + v * W, acc[r][v]);
}

/// Samples per group of the forward kernel: a group's padded inputs (about 384 KiB) stay in L2
/// while every weight block passes over them, so weights are read from memory once per group,
/// not once per sample (model D's 256->512 layer has 4.7 MB of weights).
template <class G>
inline constexpr std::size_t forward_group =
    std::clamp<std::size_t>((384u << 10) / (plan_t<G>::cin * plan_t<G>::channel_stride * sizeof(float)), 1, 16);

/// `count` samples: wide outputs (blocks*MR x Wide::positions each, consecutive) = bias +
/// conv(xt, packed weights), xt holding the samples' padded planes consecutively.
template <int W, class G>
COHORT_ALWAYS_INLINE void forward_samples(const float* __restrict xt, std::size_t count, const float* __restrict wpk,
                                          const float* __restrict bias, float* __restrict yw) {
  using V = plan_t<G>;
  using T = ForwardTile<W, G>;
  constexpr std::size_t MR = T::mr, NV = T::nv, step = NV * W;
  constexpr std::size_t full = V::positions / step * step, tail = (V::positions - full) / W;
  constexpr std::size_t in_stride = V::cin * V::channel_stride, out_stride = T::blocks * MR * V::positions;
  for (std::size_t b = 0; b < T::blocks; ++b) {
    const float* __restrict wb = wpk + b * V::cin * V::taps * MR;
    for (std::size_t n = 0; n < count; ++n) {
      const float* xn = xt + n * in_stride;
      float* yn = yw + n * out_stride;
      for (std::size_t p0 = 0; p0 < full; p0 += step) forward_tile<W, G, MR, NV>(xn, wb, bias, b * MR, p0, yn);
      if constexpr (tail > 0) forward_tile<W, G, MR, tail>(xn, wb, bias, b * MR, full, yn);
    }
  }
}

/// Output channels padded to whole vectors: the row length of transposed dY and dW.
template <class G, int W>
inline constexpr std::size_t padded_cout = round_up(plan_t<G>::cout, std::size_t(W));

/// Register tile of the dW kernel: `cb` input channels x `rows` kernel rows (all K taps of
/// each) x `ov` vectors of output channels; several channels only when a tile spans the whole
/// kernel (their patch entries are then contiguous) and one channel would leave fewer than 8
/// accumulators, so 1x1 and small kernels still keep the FMA units busy. Tap offsets inside a tile are compile-time
/// constants from one pointer (no address registers to spill), and the shape minimises loads per FMA, 1/(cb*rows*K) +
/// 1/ov, within the accumulator registers the instruction set has (24 of 32 zmm, 12 of 16 ymm/xmm).
template <int W, class G>
struct WeightGradTile {
  static constexpr std::size_t k = plan_t<G>::k, cin = plan_t<G>::cin, vectors = padded_cout<G, W> / W;
  static constexpr std::size_t budget = W == 16 ? 24 : 12;
  struct Choice {
    std::size_t rows, ov, cb;
  };
  /// Tiles start at multiples of `rows`, which must be a multiple of the plan's row_step (or K).
  static constexpr std::size_t step = std::min(plan_t<G>::row_step, k);
  static constexpr Choice choose() {
    Choice best{step, 1, 1}; // when nothing fits the budget: the smallest tile, spilling
    double best_cost = 1e9;
    for (std::size_t r = step; r <= k; r += (r + step > k && r != k) ? k - r : step)
      for (std::size_t v = 1; v <= vectors; ++v)
        for (std::size_t cb = 1; cb <= (r == k ? cin : 1); ++cb) {
          if (cin % cb != 0) continue; // whole channel groups only: no partial instances
          // More channels only where one has too few accumulators to hide the FMA latency
          // (measured: 16-channel 3x3 layers are slower with 2 x 9 than with 9).
          if (cb > 1 && r * k * v >= 8) continue;
          if (cb * r * k * v > budget && !(r == step && v == 1 && cb == 1)) continue;
          const double cost = 1.0 / double(cb * r * k) + 1.0 / double(v);
          if (cost < best_cost - 1e-12) best_cost = cost, best = {r, v, cb};
        }
    return best;
  }
  static constexpr std::size_t rows = choose().rows, ov = choose().ov, cb = choose().cb;
  /// Tiles along each axis, and the sizes of the last (partial) tile of each.
  static constexpr std::size_t row_groups = (k + rows - 1) / rows, channel_groups = (vectors + ov - 1) / ov;
  static constexpr std::size_t last_rows = k - (row_groups - 1) * rows, last_ov = vectors - (channel_groups - 1) * ov;
  static constexpr std::size_t count = cin / cb * row_groups * channel_groups;
};

/// dWt[k][o] for the patch entries of input channels [c, c+Cb), kernel rows [kh0, kh0+Rows)
/// (Cb > 1 only with all rows), and output channels [o0, o0+Ov*W), summed over samples [0, nb)
/// of a block: X in padded planes, dYt as (sample, valid position, channel). `first` starts the
/// sums at zero, otherwise they continue from dWt (the previous block). Every lane sums its
/// (n, position) terms in order.
template <int W, class G, std::size_t Rows, std::size_t Ov, std::size_t Cb>
COHORT_ALWAYS_INLINE void weight_grad_block(const float* __restrict xt, const float* __restrict dyt, std::size_t nb,
                                            std::size_t c, std::size_t kh0, std::size_t o0, float* __restrict dwt,
                                            bool first) {
  using V = plan_t<G>;
  static_assert(Cb == 1 || Rows == V::k, "dW tile: several channels only with whole kernels");
  constexpr std::size_t K = V::k, E = Rows * K, J = Cb * E;
  constexpr std::size_t cp = padded_cout<G, W>, valid = V::ho * V::wo;
  const std::size_t k0 = c * V::taps + kh0 * K; // patch index of the tile's first entry
  vec<W> acc[J][Ov];
#pragma GCC unroll 32
  for (std::size_t j = 0; j < J; ++j)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < Ov; ++v) acc[j][v] = first ? vec<W>{} : load<W>(dwt + (k0 + j) * cp + o0 + v * W);
  for (std::size_t n = 0; n < nb; ++n) {
    const float* __restrict xn = xt + (n * V::cin + c) * V::channel_stride + V::row_offset(kh0);
    const float* __restrict drow = dyt + n * valid * cp + o0;
    for (std::size_t h = 0; h < V::ho; ++h)
      for (std::size_t w = 0; w < V::wo; ++w, drow += cp) {
        const float* __restrict xp = xn + h * V::wp + w;
        vec<W> d[Ov];
#pragma GCC unroll 32
        for (std::size_t v = 0; v < Ov; ++v) d[v] = load<W>(drow + v * W);
#pragma GCC unroll 25
        for (std::size_t j = 0; j < J; ++j) {
          const vec<W> xb = broadcast<W>(xp[j / E * V::channel_stride + V::offset(j % E)]);
#pragma GCC unroll 8
          for (std::size_t v = 0; v < Ov; ++v) acc[j][v] += xb * d[v];
        }
      }
  }
#pragma GCC unroll 32
  for (std::size_t j = 0; j < J; ++j)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < Ov; ++v) store<W>(dwt + (k0 + j) * cp + o0 + v * W, acc[j][v]);
}

/// Runs tile `t` of WeightGradTile<W, G>'s enumeration (channel group and kernel-row group
/// fastest, so consecutive tiles share one slice of dY): picks the full or partial instance.
template <int W, class G>
COHORT_ALWAYS_INLINE void weight_grad_tile(const float* xt, const float* dyt, std::size_t nb, std::size_t t, float* dwt,
                                           bool first) {
  using T = WeightGradTile<W, G>;
  constexpr std::size_t groups = T::cin / T::cb;
  const std::size_t rg = t % T::row_groups, c = t / T::row_groups % groups * T::cb, og = t / (T::row_groups * groups);
  const std::size_t kh0 = rg * T::rows, o0 = og * T::ov * W;
  const bool full_rows = rg + 1 < T::row_groups, full_ov = og + 1 < T::channel_groups;
  if (full_rows && full_ov)
    weight_grad_block<W, G, T::rows, T::ov, 1>(xt, dyt, nb, c, kh0, o0, dwt, first);
  else if (full_rows)
    weight_grad_block<W, G, T::rows, T::last_ov, 1>(xt, dyt, nb, c, kh0, o0, dwt, first);
  else if (full_ov)
    weight_grad_block<W, G, T::last_rows, T::ov, T::cb>(xt, dyt, nb, c, kh0, o0, dwt, first);
  else
    weight_grad_block<W, G, T::last_rows, T::last_ov, T::cb>(xt, dyt, nb, c, kh0, o0, dwt, first);
}

/// Whether dW of G runs position-vectorised per output channel (one input channel and at most
/// 5x5 taps: the first layers). Their patch is too small to fill the (patch x channel) tiles of
/// weight_grad_block, and dY, read once per channel as wide rows, never needs transposing.
template <class G>
inline constexpr bool channel_weight_grad = G::stride == 1 && G::in_channels == 1 && G::kernel* G::kernel <= 25;

/// One pass of the per-channel dW kernel over kernel rows [kh0, kh0+Rows): for samples [0, nb),
/// acc[k] += dYw[n][p..] * X[n][p + offset(k)..] over all wide positions p, plus the bias sum
/// in acc[K*K]. `acc` holds (K*K + 1) x W partial sums, loaded and stored once per call; dYw is
/// (nb, positions) with zeros in the garbage columns and the tail.
template <int W, class G, std::size_t Rows>
COHORT_ALWAYS_INLINE void channel_grad_pass(const float* __restrict xt, const float* __restrict dyw, std::size_t nb,
                                            std::size_t kh0, float* __restrict acc) {
  using V = Wide<G>;
  constexpr std::size_t K = V::k, E = Rows * K, taps = V::taps;
  vec<W> a[E];
  vec<W> bias = load<W>(acc + taps * W);
#pragma GCC unroll 32
  for (std::size_t j = 0; j < E; ++j) a[j] = load<W>(acc + (kh0 * K + j) * W);
  for (std::size_t n = 0; n < nb; ++n) {
    const float* __restrict x = xt + n * V::plane + kh0 * V::wp;
    const float* __restrict d = dyw + n * V::positions;
    for (std::size_t p = 0; p < V::positions; p += W) {
      const vec<W> dv = load<W>(d + p);
      bias += dv;
#pragma GCC unroll 25
      for (std::size_t j = 0; j < E; ++j) a[j] += dv * load<W>(x + p + (j / K) * V::wp + j % K);
    }
  }
#pragma GCC unroll 32
  for (std::size_t j = 0; j < E; ++j) store<W>(acc + (kh0 * K + j) * W, a[j]);
  if (kh0 == 0) store<W>(acc + taps * W, bias); // every pass sums the bias; the first one keeps it
}

/// All kernel rows: one pass with AVX-512 (up to 25 + 1 accumulators of 32 registers), passes
/// of at most 11 taps with 16 registers.
template <int W, class G>
COHORT_ALWAYS_INLINE void weight_grad_channel(const float* xt, const float* dyw, std::size_t nb, float* acc) {
  constexpr std::size_t K = G::kernel, R = W == 16 ? K : std::clamp<std::size_t>(11 / K, 1, K);
  constexpr std::size_t full = K / R, last = K % R;
  for (std::size_t g = 0; g < full; ++g) channel_grad_pass<W, G, R>(xt, dyw, nb, g * R, acc);
  if constexpr (last > 0) channel_grad_pass<W, G, last>(xt, dyw, nb, full * R, acc);
}

/// Conv2d -> ReLU -> MaxPool2d<2> for one sample, from its wide output (rows x positions):
/// writes the pooled (Cout, Ho/2, Wo/2) and each window's argmax (2*down + right). Reads up to
/// 2W floats past a row's end: the caller's buffer has that much slack.
template <int W, class G>
COHORT_ALWAYS_INLINE void pool_wide(const float* __restrict yw, float* __restrict y, std::uint8_t* __restrict win) {
  using V = Wide<G>;
  constexpr std::size_t po = V::ho / 2, pw = V::wo / 2;
  for (std::size_t c = 0; c < V::cout; ++c)
    for (std::size_t ph = 0; ph < po; ++ph) {
      const float* top = yw + c * V::positions + 2 * ph * V::wp;
      relu_pool_rows<W>(top, top + V::wp, pw, y + (c * po + ph) * pw, win + (c * po + ph) * pw);
    }
}

// Entry points compiled for each instruction set (the always-inline bodies above take the
// caller's target).

} // namespace cohort::cpu::direct

#pragma GCC diagnostic pop
