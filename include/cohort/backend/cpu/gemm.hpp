#pragma once
/// \file
/// Dense matrix multiply on the host: C = alpha * op(A) * op(B) + beta * C, row-major.
///
///     cpu::gemm(false, true, M, N, K, 1.f, A, K, B, K, 0.f, C, N);   // C = A * B^T
///
/// Packed panels and an MR x (2 vectors) register tile (8 x 32 on AVX-512, 6 x 16 on AVX2,
/// 6 x 8 on the baseline), chosen at run time (simd.hpp). Each element of C is one fixed sequence
/// of operations whatever the split between threads. With beta == 0, C is written without being
/// read (it may hold garbage). Double (used by gradient checks) takes a plain reference loop.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/tensor/buffer.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12 reports micro_kernel's partial-tile buffer as maybe uninitialised where the Winograd
// kernels inline it (conv2d_winograd.hpp), even when the buffer is zero-initialised: the vector
// stores through __builtin_memcpy fill every element before it is read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace cohort::cpu {

namespace detail {

constexpr std::size_t round_up_to(std::size_t n, std::size_t m) noexcept { return (n + m - 1) / m * m; }

/// Register tile MR x NR (NR = two vectors) and cache blocks for vector width W.
template <int W>
struct GemmShape {
  static constexpr std::size_t mr = W == 16 ? 8 : 6, nr = 2 * std::size_t(W);
  static constexpr std::size_t kc = 512, mc = 96, nc = 1024; // mc a multiple of 8 and 6
};

template <class T>
inline HostBuffer<T>& pack_buffer(int which) {
  // Per-thread scratch that only grows: no allocation after the first multiply of a size.
  thread_local HostBuffer<T> buffers[2];
  return buffers[which];
}

/// Packs rows [0, kc) x cols [0, nc) of op(B) into NR-column panels, k-major, zero-padded.
/// Transposed B (a Linear layer's weights) goes through 8x8 register transposes when the vector
/// width allows (`Vector8`).
template <std::size_t NR, bool Vector8, class T>
COHORT_ALWAYS_INLINE void pack_b(bool trans, const T* __restrict b, std::size_t ldb, std::size_t kc, std::size_t nc,
                                 T* __restrict dst) {
  for (std::size_t j0 = 0; j0 < nc; j0 += NR) {
    const std::size_t cols = std::min(NR, nc - j0);
    if (Vector8 && trans && cols == NR && kc % 8 == 0) {
      for (std::size_t c = 0; c < NR; c += 8)
        for (std::size_t k = 0; k < kc; k += 8) transpose8x8(b + (j0 + c) * ldb + k, ldb, dst + k * NR + c, NR);
    } else if (!trans) {
      for (std::size_t k = 0; k < kc; ++k) {
        T* d = dst + k * NR;
        const T* src = b + k * ldb + j0;
        for (std::size_t c = 0; c < cols; ++c) d[c] = src[c];
        for (std::size_t c = cols; c < NR; ++c) d[c] = T(0);
      }
    } else {
      for (std::size_t c = 0; c < NR; ++c) {
        const T* src = b + (j0 + c) * ldb;
        if (c < cols)
          for (std::size_t k = 0; k < kc; ++k) dst[k * NR + c] = src[k];
        else
          for (std::size_t k = 0; k < kc; ++k) dst[k * NR + c] = T(0);
      }
    }
    dst += NR * kc;
  }
}

/// C[0:rows, 0:cols] = alpha * tile + beta * C, from a micro-kernel's accumulators stored as
/// rows of NR floats: the partial tiles at a product's edges.
template <std::size_t NR>
COHORT_ALWAYS_INLINE void write_partial_tile(const float* tile, float* __restrict c, std::size_t ldc, std::size_t rows,
                                             std::size_t cols, float alpha, float beta) {
  for (std::size_t r = 0; r < rows; ++r) {
    float* crow = c + r * ldc;
    const float* out = tile + r * NR;
    if (beta == 0.f)
      for (std::size_t j = 0; j < cols; ++j) crow[j] = alpha * out[j];
    else
      for (std::size_t j = 0; j < cols; ++j) crow[j] = alpha * out[j] + beta * crow[j];
  }
}

/// C[0:rows, 0:cols] = alpha * (A block x B panel) + beta * C: MR x 2 vectors of accumulators.
/// A is read in place: element (r, k) at a[r * row_stride + k * k_stride] (no packing: in these
/// skinny products each A element is used by only a few tiles); rows past `rows` repeat the last
/// valid row and are not written.
template <int W>
COHORT_ALWAYS_INLINE void micro_kernel(std::size_t kc, const float* __restrict a, std::size_t row_stride,
                                       std::size_t k_stride, const float* __restrict bp, float* __restrict c,
                                       std::size_t ldc, std::size_t rows, std::size_t cols, float alpha, float beta) {
  constexpr std::size_t MR = GemmShape<W>::mr, NR = GemmShape<W>::nr;
  const float* arow[MR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) arow[r] = a + std::min(r, rows - 1) * row_stride;
  vec<W> acc0[MR], acc1[MR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) acc0[r] = acc1[r] = vec<W>{};
  for (std::size_t k = 0; k < kc; ++k) {
    const vec<W> b0 = load<W>(bp + k * NR), b1 = load<W>(bp + k * NR + W);
    const std::size_t ak = k * k_stride;
#pragma GCC unroll 12
    for (std::size_t r = 0; r < MR; ++r) {
      const vec<W> av = broadcast<W>(arow[r][ak]);
      acc0[r] += av * b0;
      acc1[r] += av * b1;
    }
  }
  // Every index into the accumulators is a compile-time constant: a run-time one (rows < MR)
  // would make GCC keep them in memory for the whole kernel. Partial tiles go through a buffer.
  if (rows == MR && cols == NR) {
#pragma GCC unroll 32
    for (std::size_t r = 0; r < MR; ++r) {
      float* crow = c + r * ldc;
      vec<W> v0 = acc0[r] * alpha, v1 = acc1[r] * alpha;
      if (beta != 0.f) {
        v0 += load<W>(crow) * beta;
        v1 += load<W>(crow + W) * beta;
      }
      store<W>(crow, v0);
      store<W>(crow + W, v1);
    }
    return;
  }
  float tile[MR * NR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) {
    store<W>(tile + r * NR, acc0[r]);
    store<W>(tile + r * NR + W, acc1[r]);
  }
  write_partial_tile<NR>(tile, c, ldc, rows, cols, alpha, beta);
}

/// micro_kernel with panels of three vectors (8 x 48 on AVX-512: 24 accumulators, 3 B vectors
/// and the broadcast in 28 of the 32 registers), for the Winograd products whose channels are a
/// multiple of 48 and not of 32 (conv2d_winograd_transform.hpp, panel_channels): padded to two-vector
/// panels, 48 channels did a third more multiply-adds. Its own accumulators, not micro_kernel's
/// with a vector count: arrays indexed by two loop variables spilled under GCC 12.
template <int W>
COHORT_ALWAYS_INLINE void micro_kernel3(std::size_t kc, const float* __restrict a, std::size_t row_stride,
                                        std::size_t k_stride, const float* __restrict bp, float* __restrict c,
                                        std::size_t ldc, std::size_t rows, std::size_t cols, float alpha, float beta) {
  constexpr std::size_t MR = GemmShape<W>::mr, NR = 3 * std::size_t(W);
  const float* arow[MR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) arow[r] = a + std::min(r, rows - 1) * row_stride;
  vec<W> acc0[MR], acc1[MR], acc2[MR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) acc0[r] = acc1[r] = acc2[r] = vec<W>{};
  for (std::size_t k = 0; k < kc; ++k) {
    const vec<W> b0 = load<W>(bp + k * NR), b1 = load<W>(bp + k * NR + W), b2 = load<W>(bp + k * NR + 2 * W);
    const std::size_t ak = k * k_stride;
#pragma GCC unroll 12
    for (std::size_t r = 0; r < MR; ++r) {
      const vec<W> av = broadcast<W>(arow[r][ak]);
      acc0[r] += av * b0;
      acc1[r] += av * b1;
      acc2[r] += av * b2;
    }
  }
  if (rows == MR && cols == NR) {
#pragma GCC unroll 32
    for (std::size_t r = 0; r < MR; ++r) {
      float* crow = c + r * ldc;
      vec<W> v0 = acc0[r] * alpha, v1 = acc1[r] * alpha, v2 = acc2[r] * alpha;
      if (beta != 0.f) {
        v0 += load<W>(crow) * beta;
        v1 += load<W>(crow + W) * beta;
        v2 += load<W>(crow + 2 * W) * beta;
      }
      store<W>(crow, v0);
      store<W>(crow + W, v1);
      store<W>(crow + 2 * W, v2);
    }
    return;
  }
  float tile[MR * NR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) {
    store<W>(tile + r * NR, acc0[r]);
    store<W>(tile + r * NR + W, acc1[r]);
    store<W>(tile + r * NR + 2 * W, acc2[r]);
  }
  write_partial_tile<NR>(tile, c, ldc, rows, cols, alpha, beta);
}

// The micro-kernel is its own (not inlined) function per instruction set: register allocation
// over the whole blocked product spilled the B vectors to the stack.
#define COHORT_GEMM_MICRO(SUFFIX, TARGET, WIDTH)                                                                       \
  TARGET __attribute__((noinline)) inline void micro_kernel_##SUFFIX(                                                  \
      std::size_t kc, const float* a, std::size_t rs, std::size_t ks, const float* bp, float* c, std::size_t ldc,      \
      std::size_t rows, std::size_t cols, float alpha, float beta) {                                                   \
    micro_kernel<WIDTH>(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);                                           \
  }
COHORT_GEMM_MICRO(avx512, COHORT_TARGET_AVX512, 16)
COHORT_GEMM_MICRO(avx2, COHORT_TARGET_AVX2, 8)
COHORT_GEMM_MICRO(generic, , 4)
#undef COHORT_GEMM_MICRO
COHORT_TARGET_AVX512 __attribute__((noinline)) inline void
micro_kernel3_avx512(std::size_t kc, const float* a, std::size_t rs, std::size_t ks, const float* bp, float* c,
                     std::size_t ldc, std::size_t rows, std::size_t cols, float alpha, float beta) {
  micro_kernel3<16>(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);
}

/// The micro-kernel of width W with panels of `Vectors` vectors (2; 3 on AVX-512 only).
template <int W, int Vectors = 2>
COHORT_ALWAYS_INLINE void micro_kernel_for(std::size_t kc, const float* a, std::size_t rs, std::size_t ks,
                                           const float* bp, float* c, std::size_t ldc, std::size_t rows,
                                           std::size_t cols, float alpha, float beta) {
  static_assert(Vectors == 2 || (Vectors == 3 && W == 16), "micro_kernel_for: 3-vector panels are AVX-512's only");
  if constexpr (Vectors == 3)
    micro_kernel3_avx512(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);
  else if constexpr (W == 16)
    micro_kernel_avx512(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);
  else if constexpr (W == 8)
    micro_kernel_avx2(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);
  else
    micro_kernel_generic(kc, a, rs, ks, bp, c, ldc, rows, cols, alpha, beta);
}

/// The blocked product for vector width W (packing, cache blocks, register tiles).
template <int W>
COHORT_ALWAYS_INLINE void gemm_blocked(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                                       float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                       float beta, float* c, std::size_t ldc) {
  COHORT_ISA_ENTRY(isa_of_width(W)); // once per product, not per micro-tile
  using S = GemmShape<W>;
  HostBuffer<float>& bpack = pack_buffer<float>(1);
  const std::size_t bneed = round_up_to(std::min(n, S::nc), S::nr) * S::kc;
  if (bpack.size() < bneed) bpack.resize(bneed);
  const std::size_t rs = trans_a ? 1 : lda, ks = trans_a ? lda : 1; // element (i, p) of op(A)
  for (std::size_t j0 = 0; j0 < n; j0 += S::nc) {
    const std::size_t nc = std::min(S::nc, n - j0);
    for (std::size_t k0 = 0; k0 < k; k0 += S::kc) {
      const std::size_t kc = std::min(S::kc, k - k0);
      const float beta_here = k0 == 0 ? beta : 1.f;
      pack_b<S::nr, (W >= 8)>(trans_b, trans_b ? b + j0 * ldb + k0 : b + k0 * ldb + j0, ldb, kc, nc, bpack.data());
      for (std::size_t i0 = 0; i0 < m; i0 += S::mc) {
        const std::size_t mc = std::min(S::mc, m - i0);
        for (std::size_t jr = 0; jr < nc; jr += S::nr)
          for (std::size_t ir = 0; ir < mc; ir += S::mr)
            micro_kernel_for<W>(kc, a + (i0 + ir) * rs + k0 * ks, rs, ks, bpack.data() + jr * kc,
                                c + (i0 + ir) * ldc + (j0 + jr), ldc, std::min(S::mr, mc - ir),
                                std::min(S::nr, nc - jr), alpha, beta_here);
      }
    }
  }
}

COHORT_TARGET_AVX512 inline void gemm_avx512(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                                             const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                             float beta, float* c, std::size_t ldc) {
  gemm_blocked<16>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
COHORT_TARGET_AVX2 inline void gemm_avx2(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                                         const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
                                         float* c, std::size_t ldc) {
  gemm_blocked<8>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// The straightforward product for element types without a tuned kernel (double: gradient
/// checks), in a fixed order.
template <class T>
void gemm_reference(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                    std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  for (std::size_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    for (std::size_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? T(0) : beta * crow[j];
    for (std::size_t p = 0; p < k; ++p) {
      const T av = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
      if (trans_b)
        for (std::size_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
      else
        for (std::size_t j = 0; j < n; ++j) crow[j] += av * b[p * ldb + j];
    }
  }
}

} // namespace detail

/// Row-major GEMM. `lda`, `ldb`, `ldc` are row strides of A, B, C as stored (before op()).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (k == 0) {
      detail::gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    dispatch_isa(
        active_isa(), [&] { detail::gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); },
        [&] { detail::gemm_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); },
        [&] { detail::gemm_blocked<4>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  } else {
    detail::gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

/// The same product with the columns (or, when there are too few columns, the rows) of C split
/// between the pool's threads. Every element of C is computed exactly as by the serial gemm, so
/// the result does not depend on the thread count. Columns first: each task then packs only its
/// own part of B (A is read in place), while a split of rows would pack all of B in every task.
template <class T>
void gemm(ThreadPool& pool, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  using tile = detail::GemmShape<16>; // split on multiples of every kernel's tile
  const std::size_t threads = pool.size();
  if (threads == 1 || m * n * k < 32 * 1024) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (n >= threads * tile::nr) {
    const std::size_t cols = detail::round_up_to((n + threads - 1) / threads, tile::nr);
    pool.parallel_for(n, cols, [&](std::size_t lo, std::size_t hi) {
      gemm(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    });
  } else {
    const std::size_t rows = detail::round_up_to((m + threads - 1) / threads, tile::mr);
    pool.parallel_for(m, rows, [&](std::size_t lo, std::size_t hi) {
      gemm(trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc,
           ldc);
    });
  }
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop
