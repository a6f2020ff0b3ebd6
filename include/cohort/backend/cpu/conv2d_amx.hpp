#pragma once
/// \file
/// Direct convolution of bfloat16 tensors on AMX tiles (TDPBF16PS, fp32 accumulation): the
/// forward pass, dX and dW of stride-1 layers, on the wide planes of conv2d_direct.hpp.
///
/// TDPBF16PS multiplies *pairs* along the reduction. Taking each pair from two input channels at
/// the same position makes every B tile a plain strided load: a sample's padded planes are kept
/// as "pair planes", one 32-bit word per wide position holding channels (2j, 2j+1), and the B
/// tile of (tap, channel block, 16 positions from p) is channel_block/2 rows — consecutive pair
/// planes — of the 16 words at p + offset(tap). No im2col matrix and no per-tap copies: a tap is
/// a shift of the load address, as in the float kernel.
///
///   C[o][p] = b[o] + sum_{tap, channel block} A[o][channels] * B[channel pairs][p + offset(tap)]
///
/// A tiles are the weights packed as [16-row block][tap][channel block][16][channel_block], so
/// one A tile serves every position of every sample in a group. C blocks are 2x2 tiles (32
/// channels x 32 positions) or, for layers with at most 16 output channels, 1x3.
///
/// Numerics: products of bf16 values are exact in float and summed in float (order inside a tile
/// unspecified, so results differ from the float kernel in the last bits); subnormal bf16 inputs
/// read as zero. Every output is computed by one thread in a fixed order: results do not depend on
/// the thread count. The caller rounds the float result to bf16 once, as on the float path.
///
/// dW runs on tiles too (GradShape below): dY rows are A, the input transposed to (position pair,
/// channel) is B. The first layers (one input channel) have nothing to pair and stay on the float
/// kernels.
///
/// The packing and conversion routines (pack_weights, bias_tiles, pair_planes, transposed_pairs,
/// dy_row) use AVX512-BF16 and no tile instruction: conv2d_avx512_bf16.hpp runs the same layers
/// on VDPBF16PS vectors from the same data, for CPUs without AMX.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/gemm_bf16.hpp"
#include "cohort/precision/half.hpp"
#include "cohort/tensor/buffer.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::amx_conv {

/// Input channels per reduction step: the largest even divisor of `cin` up to 32 (one A tile row
/// of 64 bytes), 0 when there is none.
constexpr std::size_t channel_block_of(std::size_t cin) noexcept {
  for (std::size_t d = 32; d >= 2; d -= 2)
    if (cin % d == 0) return d;
  return 0;
}

/// The tiling of the stride-1 convolution Gk (a Conv2dGeometry the direct path handles).
template <class Gk>
struct Shape {
  using V = direct::Wide<Gk>;
  static constexpr std::size_t cin = Gk::in_channels, cout = Gk::out_channels, taps = V::taps;
  static constexpr std::size_t channel_block = channel_block_of(cin), blocks = cin / channel_block;
  /// C tiles per block along output channels (mb) and positions (nb): mb*nb + mb + nb <= 8 tiles.
  static constexpr std::size_t mb = cout > 16 ? 2 : 1, nb = mb == 2 ? 2 : 3;
  /// Output rows computed (Cout rounded up to whole blocks; the extra rows have zero weights).
  static constexpr std::size_t rows = direct::round_up(cout, 16 * mb);
  static constexpr std::size_t pair_planes = cin / 2, position_tiles = V::positions / 16;
  static constexpr std::size_t packed_size = rows * taps * cin; // bf16 weights
  /// bf16 weights between consecutive 16-row blocks of the packed A.
  static constexpr std::size_t row_block_stride = taps * cin * 16;
  /// Samples per group: their pair planes and wide outputs (about 1 MiB) stay in L2 while every
  /// block of weights passes over them.
  static constexpr std::size_t group =
      std::clamp<std::size_t>((std::size_t(1) << 20) / ((pair_planes * V::plane + rows * V::positions) * 4), 1, 16);
};

/// Whether Gk runs on AMX tiles when the CPU has them: a stride-1 convolution the direct path
/// handles, with an even channel block of at least 8 (fewer would leave most of each tile empty;
/// one-channel first layers are cheap in float anyway).
template <class Gk>
constexpr bool applicable_v() {
  if constexpr (COHORT_X86 && direct::applicable<Gk>)
    return channel_block_of(Gk::in_channels) >= 8;
  else
    return false;
}
template <class Gk>
inline constexpr bool applicable = applicable_v<Gk>();

/// Packs the weights of G (out, in, K, K) for the AMX kernel of Gk: Gk = G for the forward pass,
/// Gk = direct::transposed_geometry<G> with `transpose_rotate` for dX (W'[c][o][K-1-kh][K-1-kw]).
template <class G, class Gk>
void pack_weights(const bfloat16* w, HostBuffer<bfloat16>& out, bool transpose_rotate) {
  using S = Shape<Gk>;
  constexpr std::size_t cc = S::channel_block, taps = S::taps;
  out.resize(S::packed_size);
  for (std::size_t r = 0; r < S::rows; ++r) // Gk's output channel
    for (std::size_t t = 0; t < taps; ++t)
      for (std::size_t c = 0; c < S::cin; ++c) { // Gk's input channel
        bfloat16 v{};
        if (r < S::cout)
          v = transpose_rotate ? w[(c * G::in_channels + r) * taps + (taps - 1 - t)]
                               : w[(r * G::in_channels + c) * taps + t];
        out[(((r / 16) * taps + t) * S::blocks + c / cc) * 16 * cc + (r % 16) * cc + c % cc] = v;
      }
}

/// The bias as C tiles' initial values: row r of every 16 x 16 tile of row block r / 16 holds
/// b[r] (zero past Cout).
template <class Gk>
const float* bias_tiles(const float* bias, HostBuffer<float>& out) {
  using S = Shape<Gk>;
  out.resize(S::rows * 16);
  for (std::size_t r = 0; r < S::rows; ++r) std::fill_n(out.data() + r * 16, 16, r < S::cout ? bias[r] : 0.f);
  return out.data();
}

/// The tiling of dW for the stride-1 convolution G. Per tap t (offset f = kh*Wp + kw):
///
///   dW[o][c][t] = sum_n sum_p dY[n][o][p] * X[n][c][p + f]
///
/// a GEMM with the reduction over (sample, wide position). A tiles are dY as bf16 wide rows
/// (o, p), 32 positions per tile row; B tiles need pairs of *positions* side by side for each
/// input channel, and a tap's odd or even offset shifts which positions pair up, so each sample's
/// input is kept twice, transposed to (position pair q, channel): copy 0 pairs positions (2q,
/// 2q+1), copy 1 pairs (2q+1, 2q+2). The B tile of tap t is then 16 consecutive rows q of the
/// copy f selects, 16 channels wide: again a plain strided load.
template <class G>
struct GradShape {
  using V = direct::Wide<G>;
  static constexpr std::size_t cin = G::in_channels, cout = G::out_channels, taps = V::taps;
  /// Positions of the reduction per sample (Wide::positions rounded to whole 32-position tiles:
  /// dY is zero past the valid columns) and tile steps per sample.
  static constexpr std::size_t k_positions = direct::round_up(V::positions, 32), steps = k_positions / 32;
  static constexpr std::size_t max_offset = (V::k - 1) * (V::wp + 1);
  /// Rows q of each transposed copy: everything a B tile of any tap can read.
  static constexpr std::size_t pair_rows = (k_positions + max_offset) / 2 + 1;
  /// C tiles per block along output channels (mb) and input channels (nb).
  static constexpr std::size_t mb = cout > 16 ? 2 : 1, nb = cin > 16 ? 2 : 1;
  static constexpr std::size_t rows = direct::round_up(cout, 16 * mb), cols = direct::round_up(cin, 16 * nb);
  static constexpr std::size_t dy_size = rows * k_positions;   // bf16 per sample
  static constexpr std::size_t x_size = 2 * pair_rows * cols;  // 32-bit words per sample
  static constexpr std::size_t part_size = taps * rows * cols; // floats of one partial dW
  static constexpr std::size_t blocks = taps * (rows / (16 * mb)) * (cols / (16 * nb));
};

#if COHORT_X86
namespace detail {

using cpu::detail::tile_dot;
using cpu::detail::tile_load;
using cpu::detail::tile_store;
using cpu::detail::tile_zero;

/// Tile numbers of a block: C tile (i, j) is i*nb + j, then mb A tiles, then nb B tiles (nb of the
/// full block, so a narrower tail block uses the same numbers and the same configuration).
template <class Gk>
struct Tiles {
  using S = Shape<Gk>;
  static constexpr int a0 = int(S::mb * S::nb), b0 = a0 + int(S::mb);
  template <std::size_t NB, std::size_t X>
  static constexpr int c = int(X / NB * S::nb + X % NB);
};

/// Palette 1: C tiles 16 rows x 64 bytes, A tiles 16 rows x 2*channel_block bytes, B tiles
/// channel_block/2 rows x 64 bytes.
template <class Gk>
COHORT_TARGET_AMX_BF16 inline void configure() {
  using S = Shape<Gk>;
  using K = Tiles<Gk>;
  cpu::detail::AmxConfig config;
  for (std::size_t t = 0; t < 8; ++t) {
    const bool a = int(t) >= K::a0 && int(t) < K::b0, b = int(t) >= K::b0;
    config.bytes_per_row[t] = std::uint16_t(a ? 2 * S::channel_block : 64);
    config.rows[t] = std::uint8_t(b ? S::channel_block / 2 : 16);
  }
  _tile_loadconfig(&config);
}

/// One block of C: mb x NB tiles at output row r0 and positions [p0, p0 + 16*NB), over the whole
/// reduction. `pairs` points at the sample's pair planes + p0, `a` at the packed weights of row
/// block r0/16, `bias` at its bias tiles (nullptr: start from zero), `y` at wide output (r0, p0).
template <class Gk, std::size_t NB, std::size_t... X>
COHORT_AMX_INLINE void block(const std::uint32_t* pairs, const bfloat16* a, const float* bias, float* y,
                             std::index_sequence<X...>) {
  using S = Shape<Gk>;
  using V = direct::Wide<Gk>;
  using K = Tiles<Gk>;
  constexpr std::size_t cc = S::channel_block, a_bytes = 2 * cc, b_bytes = 4 * V::plane;
  if (bias)
    (tile_load<K::template c<NB, X>>(bias + X / NB * 256, 64), ...);
  else
    (tile_zero<K::template c<NB, X>>(), ...);
  for (std::size_t t = 0; t < S::taps; ++t) {
    const std::uint32_t* bt = pairs + (t / V::k) * V::wp + t % V::k;
    for (std::size_t cb = 0; cb < S::blocks; ++cb) {
      const bfloat16* at = a + (t * S::blocks + cb) * 16 * cc;
      tile_load<K::a0>(at, a_bytes);
      if constexpr (S::mb == 2) tile_load<K::a0 + 1>(at + S::row_block_stride, a_bytes);
      const std::uint32_t* b = bt + cb * (cc / 2) * V::plane;
      tile_load<K::b0>(b, b_bytes);
      if constexpr (NB > 1) tile_load<K::b0 + 1>(b + 16, b_bytes);
      if constexpr (NB > 2) tile_load<K::b0 + 2>(b + 32, b_bytes);
      (tile_dot<K::template c<NB, X>, K::a0 + int(X / NB), K::b0 + int(X % NB)>(), ...);
    }
  }
  (tile_store<K::template c<NB, X>>(y + X / NB * 16 * V::positions + X % NB * 16, 4 * V::positions), ...);
}

} // namespace detail

/// Pair planes of one sample from its padded float planes (Cin x Wide::plane, as
/// direct::pad_sample writes them): word p of pair plane j holds channels 2j (low half) and 2j+1
/// (high half) at position p, rounded to bf16 (to nearest even; exact for planes that came
/// from bf16 tensors, as they all do here).
template <class Gk>
COHORT_TARGET_AVX512_BF16 void pair_planes(const float* __restrict xt, std::uint32_t* __restrict pairs) {
  using V = direct::Wide<Gk>;
  static_assert(V::plane % 16 == 0);
  // cvtne2ps puts the second operand's 16 values in the low half: interleave the halves.
  alignas(64) static constexpr std::uint16_t interleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                               21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(interleave);
  for (std::size_t j = 0; j < Gk::in_channels / 2; ++j) {
    const float* even = xt + 2 * j * V::plane;
    const float* odd = even + V::plane;
    std::uint32_t* out = pairs + j * V::plane;
    for (std::size_t p = 0; p < V::plane; p += 16) {
      const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(odd + p), _mm512_loadu_ps(even + p));
      _mm512_storeu_si512(out + p, _mm512_permutexvar_epi16(order, (__m512i)both));
    }
  }
}

/// `count` samples: wide outputs (Shape::rows x Wide::positions each, consecutive) = bias +
/// conv(pair planes, packed weights); `bias` from bias_tiles, or nullptr for none. Configures
/// the tiles of the calling thread and releases them before returning.
template <class Gk>
COHORT_TARGET_AMX_BF16 void forward_samples(const std::uint32_t* pairs, std::size_t count, const bfloat16* packed,
                                            const float* bias, float* yw) {
  using S = Shape<Gk>;
  using V = direct::Wide<Gk>;
  constexpr std::size_t NB = S::nb, full = S::position_tiles / NB, tail = S::position_tiles % NB;
  constexpr std::size_t in_stride = S::pair_planes * V::plane, out_stride = S::rows * V::positions;
  detail::configure<Gk>();
  for (std::size_t r0 = 0; r0 < S::rows; r0 += 16 * S::mb) {
    const bfloat16* a = packed + r0 / 16 * S::row_block_stride;
    const float* b = bias ? bias + r0 * 16 : nullptr;
    for (std::size_t n = 0; n < count; ++n) {
      const std::uint32_t* xn = pairs + n * in_stride;
      float* yn = yw + n * out_stride + r0 * V::positions;
      for (std::size_t q = 0; q < full; ++q)
        detail::block<Gk, NB>(xn + q * NB * 16, a, b, yn + q * NB * 16, std::make_index_sequence<S::mb * NB>{});
      if constexpr (tail > 0)
        detail::block<Gk, tail>(xn + full * NB * 16, a, b, yn + full * NB * 16,
                                std::make_index_sequence<S::mb * tail>{});
    }
  }
  _tile_release(); // no tile state kept across calls
}

namespace detail {
/// 32 consecutive floats from x[first, first + 32) as 32 bf16 in order (zero at and past
/// x[end]: masked loads read nothing there).
COHORT_TARGET_AVX512_BF16 inline __attribute__((always_inline)) __m512i
bf16x32_clipped(const float* x, std::size_t first, std::size_t end) {
  const std::size_t avail = first < end ? end - first : 0;
  const auto mask = [](std::size_t n) { return __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1); };
  const __m512 lo = _mm512_maskz_loadu_ps(mask(avail), x + std::min(first, end));
  const __m512 hi = _mm512_maskz_loadu_ps(mask(avail > 16 ? avail - 16 : 0), x + std::min(first + 16, end));
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); // the second operand fills the low half
}
} // namespace detail

/// Sample n's input for dW: its padded float planes (Cin x Wide::plane) as the two transposed
/// pair copies of GradShape (zero for channels past Cin and positions past the plane).
template <class G>
COHORT_TARGET_AVX512_BF16 void transposed_pairs(const float* __restrict xt, std::uint32_t* __restrict out) {
  using S = GradShape<G>;
  using V = direct::Wide<G>;
  std::fill_n(out, S::x_size, 0u);
  alignas(64) std::uint32_t words[16];
  for (std::size_t parity = 0; parity < 2; ++parity) {
    std::uint32_t* copy = out + parity * S::pair_rows * S::cols;
    for (std::size_t c = 0; c < S::cin; ++c) {
      const float* x = xt + c * V::plane;
      for (std::size_t q0 = 0; q0 < S::pair_rows; q0 += 16) {
        // Positions 2*q0 + parity + (0 .. 31), in order: word i pairs positions 2(q0 + i) +
        // parity and the next one. Nothing is read past the plane.
        _mm512_store_si512(words, detail::bf16x32_clipped(x, 2 * q0 + parity, V::plane));
        const std::size_t nq = std::min<std::size_t>(16, S::pair_rows - q0);
        for (std::size_t i = 0; i < nq; ++i) copy[(q0 + i) * S::cols + c] = words[i];
      }
    }
  }
}

/// One channel's wide dY row (Wide::positions floats) as bf16 (GradShape::k_positions, zero
/// past the row); returns the row's sum in float (for db), positions in order.
template <class G>
COHORT_TARGET_AVX512_BF16 float dy_row(const float* __restrict row, bfloat16* __restrict out) {
  using S = GradShape<G>;
  using V = direct::Wide<G>;
  static_assert(V::positions % 16 == 0);
  __m512 sum = _mm512_setzero_ps(); // 16 lanes, each summing its positions in order
  for (std::size_t p = 0; p < V::positions; p += 16) sum = _mm512_add_ps(sum, _mm512_loadu_ps(row + p));
  for (std::size_t p = 0; p < S::k_positions; p += 32)
    _mm512_storeu_si512(out + p, detail::bf16x32_clipped(row, p, V::positions));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.f;
  for (float lane : lanes) total += lane; // lanes in order
  return total;
}

namespace detail {

/// One block of dW for tap t: mb x nb tiles at output channel o0 and input channel c0, summed
/// over `count` samples (dY rows `dyb`, transposed pairs `xtp`, consecutive) into `part`
/// (taps x rows x cols floats).
template <class G, std::size_t... X>
COHORT_AMX_INLINE void grad_block(const bfloat16* dyb, const std::uint32_t* xtp, std::size_t count, std::size_t t,
                                  std::size_t o0, std::size_t c0, float* part, std::index_sequence<X...>) {
  using S = GradShape<G>;
  using V = direct::Wide<G>;
  constexpr std::size_t NB = S::nb;
  constexpr int a0 = int(S::mb * S::nb), b0 = a0 + int(S::mb);
  const std::size_t offset = (t / V::k) * V::wp + t % V::k, parity = offset % 2;
  float* c = part + (t * S::rows + o0) * S::cols + c0;
  (tile_zero<int(X)>(), ...);
  for (std::size_t n = 0; n < count; ++n) {
    const bfloat16* a = dyb + n * S::dy_size + o0 * S::k_positions;
    const std::uint32_t* b = xtp + n * S::x_size + (parity * S::pair_rows + offset / 2) * S::cols + c0;
    for (std::size_t s = 0; s < S::steps; ++s) {
      tile_load<a0>(a + 32 * s, 2 * S::k_positions);
      if constexpr (S::mb == 2) tile_load<a0 + 1>(a + 16 * S::k_positions + 32 * s, 2 * S::k_positions);
      tile_load<b0>(b + 16 * s * S::cols, 4 * S::cols);
      if constexpr (S::nb == 2) tile_load<b0 + 1>(b + 16 * s * S::cols + 16, 4 * S::cols);
      (tile_dot<int(X), a0 + int(X / NB), b0 + int(X % NB)>(), ...);
    }
  }
  (tile_store<int(X)>(c + X / NB * 16 * S::cols + X % NB * 16, 4 * S::cols), ...);
}

} // namespace detail

/// dW blocks [lo, hi) of GradShape<G>'s enumeration (tap fastest), each summed over `count`
/// samples into `part`. Configures the calling thread's tiles (all 16 rows x 64 bytes) and
/// releases them.
template <class G>
COHORT_TARGET_AMX_BF16 void weight_grad_blocks(const bfloat16* dyb, const std::uint32_t* xtp, std::size_t count,
                                               std::size_t lo, std::size_t hi, float* part) {
  using S = GradShape<G>;
  constexpr std::size_t o_blocks = S::rows / (16 * S::mb);
  const cpu::detail::AmxConfig config;
  _tile_loadconfig(&config);
  for (std::size_t j = lo; j < hi; ++j) {
    const std::size_t t = j % S::taps, ob = j / S::taps % o_blocks, cb = j / (S::taps * o_blocks);
    detail::grad_block<G>(dyb, xtp, count, t, ob * 16 * S::mb, cb * 16 * S::nb, part,
                          std::make_index_sequence<S::mb * S::nb>{});
  }
  _tile_release();
}

#else  // declared for name lookup only: applicable<Gk> is false without x86, so nothing calls them
template <class Gk>
void pair_planes(const float* xt, std::uint32_t* pairs);
template <class Gk>
void forward_samples(const std::uint32_t* pairs, std::size_t count, const bfloat16* packed, const float* bias,
                     float* yw);
template <class G>
void transposed_pairs(const float* xt, std::uint32_t* out);
template <class G>
float dy_row(const float* row, bfloat16* out);
template <class G>
void weight_grad_blocks(const bfloat16* dyb, const std::uint32_t* xtp, std::size_t count, std::size_t lo,
                        std::size_t hi, float* part);
#endif // COHORT_X86

} // namespace cohort::cpu::amx_conv

#pragma GCC diagnostic pop
