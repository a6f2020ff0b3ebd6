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
#include <cstring>

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
template <class G>
struct Wide {
  static_assert(G::stride == 1, "direct convolution: stride 1 only");
  static constexpr std::size_t k = G::kernel, cin = G::in_channels, cout = G::out_channels;
  static constexpr std::size_t hp = G::in_h + 2 * G::padding, wp = G::in_w + 2 * G::padding;
  static constexpr std::size_t ho = G::out_h, wo = G::out_w;
  /// Wide output positions computed (a multiple of the widest tile, 32 floats).
  static constexpr std::size_t positions = round_up(ho * wp, 32);
  /// Floats per padded input plane: everything a tile may read, rounded to a cache line.
  static constexpr std::size_t plane = round_up(std::max(hp * wp, positions + (k - 1) * (wp + 1)), 16);
  static constexpr std::size_t taps = k * k;
};

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

/// Output channels per register tile of the forward/dX kernel.
template <int W>
constexpr std::size_t forward_rows = W == 16 ? 8 : 6;

/// Packs W (out, in, K, K) into blocks of MR output channels: [block][c][tap][r], zero-padded.
/// `transpose_rotate` packs the weights of the dX convolution instead: W'[c][o][K-1-kh][K-1-kw].
template <class G, std::size_t MR>
void pack_weights(const float* __restrict w, float* __restrict out, bool transpose_rotate) {
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
            v = transpose_rotate ? w[((c * G::in_channels + row) * taps) + (taps - 1 - t)]
                                 : w[(row * G::in_channels + c) * taps + t];
          }
          out[((b * depth + c) * taps + t) * MR + r] = v;
        }
}

/// One sample: wide output (blocks*MR x Wide::positions) = bias + conv(xt, packed weights).
template <int W, class G>
COHORT_ALWAYS_INLINE void forward_sample(const float* __restrict xt, const float* __restrict wpk,
                                         const float* __restrict bias, float* __restrict yw) {
  using V = Wide<G>;
  constexpr std::size_t MR = forward_rows<W>, K = V::k, NR = 2 * W;
  constexpr std::size_t blocks = (V::cout + MR - 1) / MR;
  for (std::size_t b = 0; b < blocks; ++b) {
    const float* __restrict wb = wpk + b * V::cin * V::taps * MR;
    for (std::size_t p0 = 0; p0 < V::positions; p0 += NR) {
      vec<W> acc0[MR], acc1[MR];
      for (std::size_t r = 0; r < MR; ++r) {
        const float init = bias && b * MR + r < V::cout ? bias[b * MR + r] : 0.f;
        acc0[r] = broadcast<W>(init);
        acc1[r] = acc0[r];
      }
      for (std::size_t c = 0; c < V::cin; ++c) {
        const float* __restrict xc = xt + c * V::plane + p0;
        const float* __restrict wc = wb + c * V::taps * MR;
#pragma GCC unroll 25
        for (std::size_t t = 0; t < V::taps; ++t) {
          const std::size_t off = (t / K) * V::wp + t % K;
          const vec<W> x0 = load<W>(xc + off), x1 = load<W>(xc + off + W);
#pragma GCC unroll 8
          for (std::size_t r = 0; r < MR; ++r) {
            const vec<W> wv = broadcast<W>(wc[t * MR + r]);
            acc0[r] += wv * x0;
            acc1[r] += wv * x1;
          }
        }
      }
      for (std::size_t r = 0; r < MR; ++r) {
        float* out = yw + (b * MR + r) * V::positions + p0;
        store<W>(out, acc0[r]);
        store<W>(out + W, acc1[r]);
      }
    }
  }
}

/// Register tile of the dW kernel: KR patch entries x OV vectors of output channels (fewer
/// entries when the whole patch is smaller, as for 1-channel first layers).
template <int W, std::size_t Patch = 1000000>
struct WeightGradTile {
  static constexpr std::size_t kr = std::min<std::size_t>(W == 16 ? 12 : 6, Patch), ov = 2;
};

/// Output channels padded to whole vectors: the row length of transposed dY and dW.
template <class G, int W>
inline constexpr std::size_t padded_cout = round_up(G::out_channels, std::size_t(W));

/// dWt[k][o] for patch entries [k0, k0+KR) and channels [o0, o0+OV*W), summed over samples
/// [0, nb) of a block: X in padded wide planes, dYt as (sample, valid position, channel).
/// `first` starts the sums at zero, otherwise they continue from dWt (the previous block).
template <int W, class G>
COHORT_ALWAYS_INLINE void weight_grad_block(const float* __restrict xt, const float* __restrict dyt, std::size_t nb,
                                            std::size_t k0, std::size_t o0, float* __restrict dwt, bool first) {
  using V = Wide<G>;
  constexpr std::size_t patch = V::cin * V::taps;
  constexpr std::size_t KR = WeightGradTile<W, patch>::kr, OV = WeightGradTile<W, patch>::ov;
  constexpr std::size_t cp = padded_cout<G, W>, valid = V::ho * V::wo;
  const std::size_t ov = std::min(OV, (cp - o0) / W); // 1 when only one vector of channels is left
  std::size_t off[KR];
  for (std::size_t j = 0; j < KR; ++j) {
    const std::size_t k = std::min(k0 + j, patch - 1); // past the end: repeat a valid entry, result unused
    off[j] = (k / V::taps) * V::plane + (k % V::taps / V::k) * V::wp + k % V::k;
  }
  vec<W> acc[KR][OV];
  for (std::size_t j = 0; j < KR; ++j)
    for (std::size_t v = 0; v < OV; ++v)
      acc[j][v] = first || v >= ov || k0 + j >= patch ? vec<W>{} : load<W>(dwt + (k0 + j) * cp + o0 + v * W);
  for (std::size_t n = 0; n < nb; ++n) {
    const float* __restrict xn = xt + n * V::cin * V::plane;
    const float* __restrict dn = dyt + n * valid * cp + o0;
    for (std::size_t h = 0; h < V::ho; ++h)
      for (std::size_t w = 0; w < V::wo; ++w) {
        const std::size_t p = h * V::wp + w;
        const float* drow = dn + (h * V::wo + w) * cp;
        if (ov == OV) {
          const vec<W> d0 = load<W>(drow), d1 = load<W>(drow + W);
#pragma GCC unroll 12
          for (std::size_t j = 0; j < KR; ++j) {
            const vec<W> xb = broadcast<W>(xn[off[j] + p]);
            acc[j][0] += xb * d0;
            acc[j][1] += xb * d1;
          }
        } else {
          const vec<W> d0 = load<W>(drow);
#pragma GCC unroll 12
          for (std::size_t j = 0; j < KR; ++j) acc[j][0] += broadcast<W>(xn[off[j] + p]) * d0;
        }
      }
  }
  for (std::size_t j = 0; j < KR && k0 + j < patch; ++j)
    for (std::size_t v = 0; v < ov; ++v) store<W>(dwt + (k0 + j) * cp + o0 + v * W, acc[j][v]);
}

// Entry points compiled for each instruction set (the always-inline bodies above take the
// caller's target).
#define COHORT_DIRECT_ENTRIES(SUFFIX, TARGET, WIDTH)                                                                   \
  template <class G>                                                                                                   \
  TARGET void forward_sample_##SUFFIX(const float* xt, const float* wpk, const float* bias, float* yw) {               \
    forward_sample<WIDTH, G>(xt, wpk, bias, yw);                                                                       \
  }                                                                                                                    \
  template <class G>                                                                                                   \
  TARGET void weight_grad_block_##SUFFIX(const float* xt, const float* dyt, std::size_t nb, std::size_t k0,            \
                                         std::size_t o0, float* dwt, bool first) {                                     \
    weight_grad_block<WIDTH, G>(xt, dyt, nb, k0, o0, dwt, first);                                                      \
  }
COHORT_DIRECT_ENTRIES(avx512, COHORT_TARGET_AVX512, 16)
COHORT_DIRECT_ENTRIES(avx2, COHORT_TARGET_AVX2, 8)
COHORT_DIRECT_ENTRIES(generic, , 4)
#undef COHORT_DIRECT_ENTRIES

inline int width(Isa isa) noexcept { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4; }

template <class G>
void forward_sample_dispatch(Isa isa, const float* xt, const float* wpk, const float* bias, float* yw) {
  switch (isa) {
  case Isa::avx512:
    forward_sample_avx512<G>(xt, wpk, bias, yw);
    break;
  case Isa::avx2:
    forward_sample_avx2<G>(xt, wpk, bias, yw);
    break;
  default:
    forward_sample_generic<G>(xt, wpk, bias, yw);
    break;
  }
}
template <class G>
void weight_grad_block_dispatch(Isa isa, const float* xt, const float* dyt, std::size_t nb, std::size_t k0,
                                std::size_t o0, float* dwt, bool first) {
  switch (isa) {
  case Isa::avx512:
    weight_grad_block_avx512<G>(xt, dyt, nb, k0, o0, dwt, first);
    break;
  case Isa::avx2:
    weight_grad_block_avx2<G>(xt, dyt, nb, k0, o0, dwt, first);
    break;
  default:
    weight_grad_block_generic<G>(xt, dyt, nb, k0, o0, dwt, first);
    break;
  }
}

/// The dW kernel's tile shape and channel padding for an instruction set.
struct WeightGradShape {
  std::size_t kr, oc_per_tile, padded_cout;
};
template <class G>
WeightGradShape weight_grad_shape(Isa isa) noexcept {
  constexpr std::size_t patch = G::in_channels * G::kernel * G::kernel;
  const std::size_t w = isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4;
  const std::size_t kr = w == 16 ? WeightGradTile<16, patch>::kr : WeightGradTile<8, patch>::kr;
  return {kr, 2 * w, round_up(G::out_channels, w)};
}

/// db[o] (+)= sum over samples and positions of dYt[n][q][o], vectorised over channels: each
/// channel is one lane summed in (n, q) order, so the result is reproducible.
template <int W>
COHORT_ALWAYS_INLINE void bias_grad_impl(const float* __restrict dyt, std::size_t rows, std::size_t padded,
                                         std::size_t cout, float* __restrict db, bool accumulate) {
  for (std::size_t o0 = 0; o0 < padded; o0 += W) {
    vec<W> acc{};
    for (std::size_t r = 0; r < rows; ++r) acc += load<W>(dyt + r * padded + o0);
    float lanes[W];
    __builtin_memcpy(lanes, &acc, sizeof acc);
    for (std::size_t l = 0; l < std::size_t(W) && o0 + l < cout; ++l)
      db[o0 + l] = accumulate ? db[o0 + l] + lanes[l] : lanes[l];
  }
}
COHORT_TARGET_AVX512 inline void bias_grad_avx512(const float* dyt, std::size_t rows, std::size_t padded,
                                                  std::size_t cout, float* db, bool accumulate) {
  bias_grad_impl<16>(dyt, rows, padded, cout, db, accumulate);
}
COHORT_TARGET_AVX2 inline void bias_grad_avx2(const float* dyt, std::size_t rows, std::size_t padded, std::size_t cout,
                                              float* db, bool accumulate) {
  bias_grad_impl<8>(dyt, rows, padded, cout, db, accumulate);
}
inline void bias_grad(Isa isa, const float* dyt, std::size_t rows, std::size_t padded, std::size_t cout, float* db,
                      bool accumulate) {
  if (isa == Isa::avx512)
    bias_grad_avx512(dyt, rows, padded, cout, db, accumulate);
  else if (isa == Isa::avx2)
    bias_grad_avx2(dyt, rows, padded, cout, db, accumulate);
  else
    bias_grad_impl<4>(dyt, rows, padded, cout, db, accumulate);
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
  transpose_dy_impl<G, true>(dy, dyt, padded, relu_of);
}
template <class G>
void transpose_dy(const float* dy, float* dyt, std::size_t padded, const float* relu_of = nullptr) {
  if (active_isa() != Isa::generic)
    transpose_dy_avx2<G>(dy, dyt, padded, relu_of);
  else
    transpose_dy_impl<G, false>(dy, dyt, padded, relu_of);
}

/// Rows (MR) of the forward kernel for an instruction set.
inline std::size_t forward_rows_for(Isa isa) noexcept { return isa == Isa::avx512 ? 8 : 6; }

/// Copies the valid columns of a wide output (rows x Wide::positions) into (rows, ho, wo),
/// applying max(., 0) when a following ReLU is fused.
template <class G>
void unwiden(const float* __restrict yw, float* __restrict y, std::size_t rows, bool relu = false) {
  using V = Wide<G>;
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

/// Whether the direct path handles G (otherwise the im2col path does).
template <class G>
inline constexpr bool applicable = G::stride == 1 && G::padding + 1 <= G::kernel;

} // namespace cohort::cpu::direct

#pragma GCC diagnostic pop
