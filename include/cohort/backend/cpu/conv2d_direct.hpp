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

constexpr std::size_t round_up(std::size_t n, std::size_t m) noexcept { return (n + m - 1) / m * m; }

/// The wide-plane geometry of a stride-1 convolution described by G (a Conv2dGeometry).
///
/// Rows have stride Wp = W + P, not W + 2P: the P zeros that start row r+1 double as the right
/// padding of row r (a tap past the end of a row reads them). Fewer garbage columns per row, and
/// P more zeros after the last row keep the bottom-right taps inside the plane.
template <class G>
struct Wide {
  static_assert(G::stride == 1, "direct convolution: stride 1 only");
  static constexpr std::size_t k = G::kernel, cin = G::in_channels, cout = G::out_channels;
  static constexpr std::size_t hp = G::in_h + 2 * G::padding, wp = G::in_w + G::padding;
  static constexpr std::size_t ho = G::out_h, wo = G::out_w;
  static_assert(wo <= wp, "direct convolution: needs padding < kernel");
  /// Wide output positions computed: Ho rows of Wp, rounded up to a whole widest vector.
  static constexpr std::size_t positions = round_up(ho * wp, 16);
  /// Floats per padded input plane: everything a tile may read, rounded to a cache line.
  static constexpr std::size_t plane = round_up(std::max(hp * wp + G::padding, positions + (k - 1) * (wp + 1)), 16);
  static constexpr std::size_t taps = k * k;
  // The plan interface the kernels read (see Strided): floats between input channels, and
  // where tap t reads relative to an output position (rows of tap group kh0 on, for dW tiles).
  static constexpr std::size_t channel_stride = plane;
  static constexpr std::size_t offset(std::size_t t) noexcept { return (t / k) * wp + t % k; }
  static constexpr std::size_t row_offset(std::size_t kh0) noexcept { return kh0 * wp; }
  static constexpr std::size_t row_step = 1; // dW tiles may start at any kernel row
};

/// The wide-plane geometry of a convolution with stride S > 1: the zero-padded input split into
/// S x S phase planes, phase (a, b) holding padded rows a, a+S, ... and columns b, b+S, ...
///
/// Output (h, w) reads padded input (S*h + kh, S*w + kw) = phase (kh % S, kw % S) at (h + kh/S,
/// w + kw/S): with phase rows of stride Wp, every tap is again a contiguous shifted row, now of
/// its phase's plane, and the stride-1 kernels run unchanged on offset(t). No im2col matrix, no
/// wasted taps: a 3x3 stride-2 convolution reads 4 phases, a 1x1 one only phase (0, 0).
template <class G>
struct Strided {
  static_assert(G::stride > 1 && G::padding < G::kernel, "strided direct convolution: stride > 1, padding < kernel");
  static constexpr std::size_t s = G::stride, k = G::kernel, cin = G::in_channels, cout = G::out_channels;
  static constexpr std::size_t ho = G::out_h, wo = G::out_w;
  /// Phases per axis some tap reads (all S unless the kernel is smaller than the stride).
  static constexpr std::size_t phases = std::min(s, k);
  /// How far past an output position (in phase rows/columns) the taps reach.
  static constexpr std::size_t reach = (k - 1) / s;
  static constexpr std::size_t wp = std::max((G::in_w + 2 * G::padding + s - 1) / s, wo + reach);
  static constexpr std::size_t hq = std::max((G::in_h + 2 * G::padding + s - 1) / s, ho + reach);
  static constexpr std::size_t positions = round_up(ho * wp, 16);
  /// Floats per phase plane: everything a tile may read, rounded to a cache line.
  static constexpr std::size_t plane = round_up(std::max(hq * wp, positions + reach * (wp + 1)), 16);
  static constexpr std::size_t taps = k * k;
  static constexpr std::size_t channel_stride = phases * phases * plane;
  static constexpr std::size_t offset(std::size_t t) noexcept {
    const std::size_t kh = t / k, kw = t % k;
    return ((kh % s) * phases + kw % s) * plane + (kh / s) * wp + kw / s;
  }
  /// dW tiles start at kernel rows kh0 that are multiples of S: the phase of row kh0 + r is then
  /// that of r, and offset(kh0*K + j) = row_offset(kh0) + offset(j).
  static constexpr std::size_t row_offset(std::size_t kh0) noexcept { return kh0 / s * wp; }
  static constexpr std::size_t row_step = s;
};

/// Whether the direct path handles G (otherwise the im2col path does).
template <class G>
inline constexpr bool applicable = G::stride == 1 && G::padding + 1 <= G::kernel;
template <class G>
inline constexpr bool strided_applicable = G::stride > 1 && G::padding < G::kernel;

/// A kernel "plan" (Wide, Strided, StridedDx): what forward_tile and weight_grad_block read.
template <class X>
concept KernelPlan = requires {
  X::channel_stride;
  X::positions;
};
/// The plan of X: X itself, or the input plan of a Conv2dGeometry (Wide for stride 1).
template <class X>
struct plan_of {
  using type = std::conditional_t<X::stride == 1, Wide<X>, Strided<X>>;
};
template <KernelPlan X>
struct plan_of<X> {
  using type = X;
};
template <class X>
using plan_t = typename plan_of<X>::type;

/// Copies one (C, H, W) sample into zero-padded wide planes (C x Wide::plane). With `relu_of`
/// (a tensor of the sample's shape), copies x where relu_of > 0 and 0 elsewhere: the gradient
/// through a fused ReLU.
template <class G>
void pad_sample(const float* __restrict x, float* __restrict xt, const float* __restrict relu_of = nullptr) {
  using V = Wide<G>;
  for (std::size_t c = 0; c < V::cin; ++c) {
    float* __restrict plane = xt + c * V::plane;
    std::memset(plane, 0, V::plane * sizeof(float));
    for (std::size_t h = 0; h < G::in_h; ++h) {
      const std::size_t row = (c * G::in_h + h) * G::in_w;
      float* __restrict out = plane + (h + G::padding) * V::wp + G::padding;
      if (relu_of)
        for (std::size_t w = 0; w < G::in_w; ++w) out[w] = relu_of[row + w] > 0.f ? x[row + w] : 0.f;
      else
        std::memcpy(out, x + row, G::in_w * sizeof(float));
    }
  }
}

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
  for (std::size_t r = 0; r < MR; ++r) {
    const vec<W> init = broadcast<W>(bias && row0 + r < V::cout ? bias[row0 + r] : 0.f);
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
      for (std::size_t v = 0; v < NV; ++v) x[v] = load<W>(xs + v * W);
#pragma GCC unroll 12
      for (std::size_t r = 0; r < MR; ++r) {
        const vec<W> wv = broadcast<W>(wc[t * MR + r]);
        for (std::size_t v = 0; v < NV; ++v) acc[r][v] += wv * x[v];
      }
    }
  }
  for (std::size_t r = 0; r < MR; ++r)
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
  for (std::size_t j = 0; j < J; ++j)
    for (std::size_t v = 0; v < Ov; ++v) acc[j][v] = first ? vec<W>{} : load<W>(dwt + (k0 + j) * cp + o0 + v * W);
  for (std::size_t n = 0; n < nb; ++n) {
    const float* __restrict xn = xt + (n * V::cin + c) * V::channel_stride + V::row_offset(kh0);
    const float* __restrict drow = dyt + n * valid * cp + o0;
    for (std::size_t h = 0; h < V::ho; ++h)
      for (std::size_t w = 0; w < V::wo; ++w, drow += cp) {
        const float* __restrict xp = xn + h * V::wp + w;
        vec<W> d[Ov];
        for (std::size_t v = 0; v < Ov; ++v) d[v] = load<W>(drow + v * W);
#pragma GCC unroll 25
        for (std::size_t j = 0; j < J; ++j) {
          const vec<W> xb = broadcast<W>(xp[j / E * V::channel_stride + V::offset(j % E)]);
#pragma GCC unroll 8
          for (std::size_t v = 0; v < Ov; ++v) acc[j][v] += xb * d[v];
        }
      }
  }
  for (std::size_t j = 0; j < J; ++j)
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
      for (std::size_t v = 0; v < 8; ++v)
        if (v < nv) acc[v] += load<W>(row + v * W);
    }
    for (std::size_t v = 0; v < nv; ++v) {
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
