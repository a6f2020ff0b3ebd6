#pragma once
/// \file
/// Pointwise convolutions (1x1, stride 1, no padding) on the CPU: per sample a matrix product,
/// Y (Out x P) = W (Out x In) X (In x P) over the P positions of a plane, which needs neither the
/// direct path's padded plane copies nor a GEMM's packing: W is broadcast from memory, X's rows
/// are read in place (conv2d.hpp's dispatch sends float layers here). MobileNets spend a large part of a
/// step in these layers (MobileNetV2Small at batch 128 on Sapphire Rapids: 177 ms of direct-path
/// time in its 1x1 layers, against a whole step of ~390 ms after this path).
///
///     cpu::pointwise::forward<G>(ctx, isa, x, w, b, y, batch, relu);
///     dy = cpu::pointwise::masked_dy<G>(ctx, dy, relu_y, batch);   // a fused ReLU's gradient
///     cpu::pointwise::input_grad<G>(ctx, isa, w, dy, dx, batch);
///     cpu::pointwise::weight_grad<G>(ctx, isa, x, dy, dw, db, batch, accumulate);  // weight_grad_pays<G>
///
/// Forward and dX = W^T dY (the same product, W read transposed) split the batch between threads;
/// dW = sum over samples and positions of dY X^T runs on fixed chunks of samples, each summed
/// onto a partial of its own, the partials then added in order (db alike), so no result depends
/// on the thread count. Below weight_grad_pays the dispatch keeps the direct path's dW. Positions are vectorised; the
/// last vector of a plane whose size is not a multiple of the width is loaded and stored partially, never past the
/// plane.

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d_path_common.hpp"
#include "cohort/backend/cpu/simd.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::pointwise {

/// Whether the pointwise path takes a convolution of geometry G: 1x1, stride 1, no padding, and
/// planes of at least 16 positions (one AVX-512 vector; smaller planes, as a squeeze-and-
/// excitation gate's 1x1, waste most lanes and stay on the direct path).
template <class G>
inline constexpr bool applicable = G::kernel == 1 && G::stride == 1 && G::padding == 0 && G::out_plane >= 16;

namespace detail {

/// `n` < W floats as a vector, the rest zero; and its counterpart store.
template <int W>
COHORT_ALWAYS_INLINE vec<W> load_part(const float* p, std::size_t n) noexcept {
  vec<W> v{};
  __builtin_memcpy(&v, p, n * sizeof(float));
  return v;
}
template <int W>
COHORT_ALWAYS_INLINE void store_part(float* p, const vec<W>& v, std::size_t n) noexcept {
  __builtin_memcpy(p, &v, n * sizeof(float));
}

/// Rows [0, R) and positions [0, V * W) of Y = A X (+ bias, then max(., 0) with relu): A's
/// element (m, k) at a[m * lda + k * ak], X's rows of stride ldx. With Tail, the last of the V
/// vectors holds only `tail` positions.
template <int W, int R, int V, bool Tail>
COHORT_ALWAYS_INLINE void product_tile(const float* __restrict a, std::size_t lda, std::size_t ak, std::size_t k_count,
                                       const float* __restrict x, std::size_t ldx, const float* __restrict bias,
                                       bool relu, float* __restrict y, std::size_t ldy, std::size_t tail) {
  vec<W> acc[R][V];
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r) {
    const vec<W> init = bias ? broadcast<W>(bias[r]) : vec<W>{};
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) acc[r][v] = init;
  }
  for (std::size_t k = 0; k < k_count; ++k) {
    const float* row = x + k * ldx;
    vec<W> xv[V];
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) xv[v] = Tail && v == V - 1 ? load_part<W>(row + v * W, tail) : load<W>(row + v * W);
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
      const vec<W> w = broadcast<W>(a[std::size_t(r) * lda + k * ak]);
#pragma GCC unroll 32
      for (int v = 0; v < V; ++v) acc[r][v] += w * xv[v];
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) {
      const vec<W> out = relu ? (acc[r][v] > 0.f ? acc[r][v] : vec<W>{}) : acc[r][v];
      if (Tail && v == V - 1)
        store_part<W>(y + std::size_t(r) * ldy + v * W, out, tail);
      else
        store<W>(y + std::size_t(r) * ldy + v * W, out);
    }
}

/// All rows of Y for positions [p0, p0 + V * W) (the last vector partial with Tail): blocks of
/// R rows, then single rows.
template <int W, int R, int V, bool Tail>
COHORT_ALWAYS_INLINE void product_columns(const float* a, std::size_t lda, std::size_t ak, std::size_t m_count,
                                          std::size_t k_count, const float* x, std::size_t ldx, const float* bias,
                                          bool relu, float* y, std::size_t ldy, std::size_t tail) {
  std::size_t m = 0;
  for (; m + R <= m_count; m += R)
    product_tile<W, R, V, Tail>(a + m * lda, lda, ak, k_count, x, ldx, bias ? bias + m : nullptr, relu, y + m * ldy,
                                ldy, tail);
  for (; m < m_count; ++m)
    product_tile<W, 1, V, Tail>(a + m * lda, lda, ak, k_count, x, ldx, bias ? bias + m : nullptr, relu, y + m * ldy,
                                ldy, tail);
}

/// One sample's Y (m_count x P) = A X (k_count x P), rows of stride P. Row blocks outermost:
/// a block's rows are written whole, in few streams, while the sample's X (at most a few hundred
/// KiB) stays in cache for the next block.
template <int W>
COHORT_ALWAYS_INLINE void product(const float* a, std::size_t lda, std::size_t ak, std::size_t m_count,
                                  std::size_t k_count, const float* x, std::size_t positions, const float* bias,
                                  bool relu, float* y) {
  constexpr int R = W == 16 ? 8 : 4; // accumulators: R x 3 vectors, within the register file
  constexpr std::size_t block = 3 * W;
  const std::size_t full = positions / block * block, rest = positions - full;
  for (std::size_t m0 = 0; m0 < m_count; m0 += 64) {
    const std::size_t rows = std::min<std::size_t>(64, m_count - m0);
    const float* am = a + m0 * lda;
    const float* bm = bias ? bias + m0 : nullptr;
    float* ym = y + m0 * positions;
    for (std::size_t p = 0; p < full; p += block)
      product_columns<W, R, 3, false>(am, lda, ak, rows, k_count, x + p, positions, bm, relu, ym + p, positions, 0);
    if (rest == 0) continue;
    const std::size_t vectors = (rest + W - 1) / W, tail = rest % W;
    const float* xr = x + full;
    float* yr = ym + full;
    // (rest < 3 W: one or two whole vectors, then a partial one, or whole ones only.)
    if (tail == 0) {
      if (vectors == 1)
        product_columns<W, R, 1, false>(am, lda, ak, rows, k_count, xr, positions, bm, relu, yr, positions, 0);
      else
        product_columns<W, R, 2, false>(am, lda, ak, rows, k_count, xr, positions, bm, relu, yr, positions, 0);
    } else if (vectors == 1) {
      product_columns<W, R, 1, true>(am, lda, ak, rows, k_count, xr, positions, bm, relu, yr, positions, tail);
    } else if (vectors == 2) {
      product_columns<W, R, 2, true>(am, lda, ak, rows, k_count, xr, positions, bm, relu, yr, positions, tail);
    } else {
      product_columns<W, R, 3, true>(am, lda, ak, rows, k_count, xr, positions, bm, relu, yr, positions, tail);
    }
  }
}

/// acc[r][c] += dY row r . X row c over `positions` (lane-wise; the caller sums the lanes), for
/// R x C rows of dY (stride ldd) and of X (stride ldx), the last vector partial.
template <int W, int R, int C>
COHORT_ALWAYS_INLINE void outer_tile(const float* __restrict dy, std::size_t ldd, const float* __restrict x,
                                     std::size_t ldx, std::size_t positions, vec<W> (&acc)[R][C]) {
  const std::size_t full = positions / W * W, tail = positions - full;
  for (std::size_t p = 0; p < full; p += W) {
    vec<W> xv[C];
    for (int c = 0; c < C; ++c) xv[c] = load<W>(x + std::size_t(c) * ldx + p);
    for (int r = 0; r < R; ++r) {
      const vec<W> d = load<W>(dy + std::size_t(r) * ldd + p);
      for (int c = 0; c < C; ++c) acc[r][c] += d * xv[c];
    }
  }
  if (tail) {
    vec<W> xv[C];
    for (int c = 0; c < C; ++c) xv[c] = load_part<W>(x + std::size_t(c) * ldx + full, tail);
    for (int r = 0; r < R; ++r) {
      const vec<W> d = load_part<W>(dy + std::size_t(r) * ldd + full, tail);
      for (int c = 0; c < C; ++c) acc[r][c] += d * xv[c];
    }
  }
}

/// part[o][c] = sum over samples [0, count) and positions of dY[n][o] X[n][c], for output rows
/// [o0, o0 + R) (R or fewer: `rows`) and all In columns. Lanes are summed in a fixed order.
template <int W, int R, int C>
COHORT_ALWAYS_INLINE void weight_grad_rows(const float* dy, const float* x, std::size_t count, std::size_t out_c,
                                           std::size_t in_c, std::size_t positions, std::size_t o0, std::size_t rows,
                                           float* part) {
  const std::size_t dy_sample = out_c * positions, x_sample = in_c * positions;
  for (std::size_t c0 = 0; c0 < in_c; c0 += C) {
    const std::size_t cols = std::min<std::size_t>(C, in_c - c0);
    vec<W> acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = vec<W>{};
    for (std::size_t n = 0; n < count; ++n) {
      const float* d = dy + n * dy_sample + o0 * positions;
      const float* xs = x + n * x_sample + c0 * positions;
      if (rows == std::size_t(R) && cols == std::size_t(C)) {
        outer_tile<W, R, C>(d, positions, xs, positions, positions, acc);
      } else {
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t c = 0; c < cols; ++c) {
            vec<W> one[1][1] = {{acc[r][c]}};
            outer_tile<W, 1, 1>(d + r * positions, positions, xs + c * positions, positions, positions, one);
            acc[r][c] = one[0][0];
          }
      }
    }
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) part[(o0 + r) * in_c + c0 + c] = hsum<W>(acc[r][c]);
  }
}

template <int W>
COHORT_ALWAYS_INLINE void weight_grad_block(const float* dy, const float* x, std::size_t count, std::size_t out_c,
                                            std::size_t in_c, std::size_t positions, std::size_t o0, float* part) {
  constexpr int R = 4, C = W == 16 ? 6 : 3; // R x C accumulators + C inputs + 1, within the registers
  weight_grad_rows<W, R, C>(dy, x, count, out_c, in_c, positions, o0, std::min<std::size_t>(R, out_c - o0), part);
}

/// db partial: sum over samples [0, count) and positions of dY[n][o], lanes in a fixed order.
template <int W>
COHORT_ALWAYS_INLINE void bias_grad_block(const float* dy, std::size_t count, std::size_t out_c, std::size_t positions,
                                          float* part) {
  const std::size_t full = positions / W * W, tail = positions - full;
  for (std::size_t o = 0; o < out_c; ++o) {
    vec<W> acc{};
    for (std::size_t n = 0; n < count; ++n) {
      const float* d = dy + (n * out_c + o) * positions;
      for (std::size_t p = 0; p < full; p += W) acc += load<W>(d + p);
      if (tail) acc += load_part<W>(d + full, tail);
    }
    part[o] = hsum<W>(acc);
  }
}

// The entry points per instruction set.

#define COHORT_DETAIL_POINTWISE_ENTRIES(isa_tag, W, target, entry)                                                     \
  target inline void product_##isa_tag(const float* a, std::size_t lda, std::size_t ak, std::size_t m_count,           \
                                       std::size_t k_count, const float* x, std::size_t positions, const float* bias,  \
                                       bool relu, float* y) {                                                          \
    entry;                                                                                                             \
    product<W>(a, lda, ak, m_count, k_count, x, positions, bias, relu, y);                                             \
  }                                                                                                                    \
  target inline void weight_grad_##isa_tag(const float* dy, const float* x, std::size_t count, std::size_t out_c,      \
                                           std::size_t in_c, std::size_t positions, std::size_t o0, float* part) {     \
    entry;                                                                                                             \
    weight_grad_block<W>(dy, x, count, out_c, in_c, positions, o0, part);                                              \
  }                                                                                                                    \
  target inline void bias_grad_##isa_tag(const float* dy, std::size_t count, std::size_t out_c, std::size_t positions, \
                                         float* part) {                                                                \
    entry;                                                                                                             \
    bias_grad_block<W>(dy, count, out_c, positions, part);                                                             \
  }
// (dispatch_isa itself records the generic path's entry.)
COHORT_DETAIL_POINTWISE_ENTRIES(avx512, 16, COHORT_TARGET_AVX512, COHORT_ISA_ENTRY(Isa::avx512))
COHORT_DETAIL_POINTWISE_ENTRIES(avx2, 8, COHORT_TARGET_AVX2, COHORT_ISA_ENTRY(Isa::avx2))
COHORT_DETAIL_POINTWISE_ENTRIES(generic, 4, , (void)0)
#undef COHORT_DETAIL_POINTWISE_ENTRIES

inline void product_on(Isa isa, const float* a, std::size_t lda, std::size_t ak, std::size_t m_count,
                       std::size_t k_count, const float* x, std::size_t positions, const float* bias, bool relu,
                       float* y) {
  dispatch_isa(
      isa, [&] { product_avx512(a, lda, ak, m_count, k_count, x, positions, bias, relu, y); },
      [&] { product_avx2(a, lda, ak, m_count, k_count, x, positions, bias, relu, y); },
      [&] { product_generic(a, lda, ak, m_count, k_count, x, positions, bias, relu, y); });
}

/// Samples per partial sum of dW and db: fixed by the batch size alone (at most 8 chunks).
inline std::size_t samples_per_chunk(std::size_t batch) noexcept {
  const std::size_t chunks = std::min<std::size_t>(8, std::max<std::size_t>(1, batch / 8));
  return (batch + chunks - 1) / chunks;
}

} // namespace detail

/// Y = W X (+ b), max(Y, 0) with relu, for every sample (float).
template <class G>
void forward(CpuContext& ctx, Isa isa, const float* x, const float* w, const float* b, float* y, std::size_t batch,
             bool relu) {
  static_assert(applicable<G>, "pointwise::forward: a 1x1, stride-1, unpadded convolution only");
  constexpr std::size_t in_c = G::in_channels, out_c = G::out_channels, positions = G::out_plane;
  ctx.threads().parallel_for(batch, 1, [=](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n)
      detail::product_on(isa, w, in_c, 1, out_c, in_c, x + n * G::in_size, positions, b, relu, y + n * G::out_size);
  });
}

/// Whether this path's dW pays: planes of 256 positions and more. On smaller planes the direct
/// path's dW (transposed dY, output-channel tiles) ran 1.4-3x faster (Sapphire Rapids, 2 threads,
/// MobileNetV2Small's layers at batch 128: 7x7 and 4x4 planes), on 28x28 ones 1.5-1.6x slower.
template <class G>
inline constexpr bool weight_grad_pays = applicable<G>&& G::out_plane >= 256;

/// dY masked by a fused ReLU's output (relu_y > 0) into a transient copy; dY itself without one.
template <class G>
const float* masked_dy(CpuContext& ctx, const float* dy, const float* relu_y, std::size_t batch) {
  if (!relu_y) return dy;
  float* masked = cpu::detail::transient(cpu::detail::Transient::output, batch * G::out_size);
  ctx.threads().parallel_for(batch * G::out_size, 1 << 14, [=](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) masked[i] = relu_y[i] > 0.f ? dy[i] : 0.f;
  });
  return masked;
}

/// dX = W^T dY for every sample (float; dY already masked).
template <class G>
void input_grad(CpuContext& ctx, Isa isa, const float* w, const float* dy, float* dx, std::size_t batch) {
  static_assert(applicable<G>, "pointwise::input_grad: a 1x1, stride-1, unpadded convolution only");
  constexpr std::size_t in_c = G::in_channels, out_c = G::out_channels, positions = G::out_plane;
  ctx.threads().parallel_for(batch, 1, [=](std::size_t lo, std::size_t hi) {
    for (std::size_t n = lo; n < hi; ++n)
      detail::product_on(isa, w, 1, in_c, in_c, out_c, dy + n * G::out_size, positions, nullptr, false,
                         dx + n * G::in_size);
  });
}

/// dW (+)= sum over samples of dY X^T, db (+)= sum of dY (float; dY already masked; db may be
/// null).
template <class G>
void weight_grad(CpuContext& ctx, Isa isa, const float* x, const float* dy, float* dw, float* db, std::size_t batch,
                 bool accumulate) {
  static_assert(applicable<G>, "pointwise::weight_grad: a 1x1, stride-1, unpadded convolution only");
  constexpr std::size_t in_c = G::in_channels, out_c = G::out_channels, positions = G::out_plane;
  ThreadPool& pool = ctx.threads();
  // By (chunk of samples, block of 4 output rows), each chunk onto a partial of its own.
  const std::size_t per_chunk = detail::samples_per_chunk(batch), chunks = (batch + per_chunk - 1) / per_chunk;
  constexpr std::size_t row_blocks = (out_c + 3) / 4, part = out_c * in_c;
  float* parts = cpu::detail::transient(cpu::detail::Transient::partials, chunks * (part + out_c));
  pool.parallel_for(chunks * row_blocks, 1, [=](std::size_t lo, std::size_t hi) {
    for (std::size_t t = lo; t < hi; ++t) {
      const std::size_t c = t / row_blocks, o0 = t % row_blocks * 4;
      const std::size_t n0 = c * per_chunk, count = std::min(batch, n0 + per_chunk) - n0;
      const float* dyc = dy + n0 * G::out_size;
      const float* xc = x + n0 * G::in_size;
      float* pc = parts + c * part;
      dispatch_isa(
          isa, [&] { detail::weight_grad_avx512(dyc, xc, count, out_c, in_c, positions, o0, pc); },
          [&] { detail::weight_grad_avx2(dyc, xc, count, out_c, in_c, positions, o0, pc); },
          [&] { detail::weight_grad_generic(dyc, xc, count, out_c, in_c, positions, o0, pc); });
    }
  });
  float* bias_parts = parts + chunks * part;
  if (db)
    pool.parallel_for(chunks, 1, [=](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        const std::size_t n0 = c * per_chunk, count = std::min(batch, n0 + per_chunk) - n0;
        const float* dyc = dy + n0 * G::out_size;
        float* pc = bias_parts + c * out_c;
        dispatch_isa(
            isa, [&] { detail::bias_grad_avx512(dyc, count, out_c, positions, pc); },
            [&] { detail::bias_grad_avx2(dyc, count, out_c, positions, pc); },
            [&] { detail::bias_grad_generic(dyc, count, out_c, positions, pc); });
      }
    });
  for (std::size_t i = 0; i < part; ++i) {
    float s = parts[i];
    for (std::size_t c = 1; c < chunks; ++c) s += parts[c * part + i];
    dw[i] = accumulate ? dw[i] + s : s;
  }
  for (std::size_t o = 0; db && o < out_c; ++o) {
    float s = bias_parts[o];
    for (std::size_t c = 1; c < chunks; ++c) s += bias_parts[c * out_c + o];
    db[o] = accumulate ? db[o] + s : s;
  }
}

} // namespace cohort::cpu::pointwise

#pragma GCC diagnostic pop
