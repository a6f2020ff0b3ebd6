#pragma once
/// \file
/// Dense matrix multiply on the host: C = alpha * op(A) * op(B) + beta * C, row-major.
///
///     cpu::gemm(false, true, M, N, K, 1.f, A, K, B, K, 0.f, C, N);   // C = A * B^T
///
/// Packed panels and an MR x NR register tile written with vector extensions, so the compiler
/// emits SSE, AVX2 or AVX-512 code for the flags the translation unit is built with. With
/// beta == 0, C is written without being read (it may hold garbage).

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort::cpu {

namespace detail {

// Vector extensions cannot be applied to a dependent type, hence one typedef per element type.
template <class T>
struct vector64;
template <>
struct vector64<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct vector64<double> {
  typedef double type __attribute__((vector_size(64)));
};

template <class T>
struct gemm_tile {
  static constexpr std::size_t mr = 6;
  static constexpr std::size_t nr = 64 / sizeof(T); // one 64-byte vector per row of the tile
  using vec = typename vector64<T>::type;
  static constexpr std::size_t kc = 256, mc = 72, nc = 1024;
};

constexpr std::size_t round_up_to(std::size_t n, std::size_t m) noexcept { return (n + m - 1) / m * m; }

template <class T>
inline HostBuffer<T>& pack_buffer(int which) {
  // Per-thread scratch that only grows: no allocation after the first multiply of a size.
  thread_local HostBuffer<T> buffers[2];
  return buffers[which];
}

/// Packs rows [0, mc) x cols [0, kc) of op(A) into MR-row panels, k-major, zero-padded.
template <class T>
void pack_a(bool trans, const T* a, std::size_t lda, std::size_t mc, std::size_t kc, T* dst) {
  constexpr std::size_t mr = gemm_tile<T>::mr;
  for (std::size_t i0 = 0; i0 < mc; i0 += mr) {
    const std::size_t rows = std::min(mr, mc - i0);
    for (std::size_t k = 0; k < kc; ++k) {
      for (std::size_t r = 0; r < rows; ++r) dst[k * mr + r] = trans ? a[k * lda + (i0 + r)] : a[(i0 + r) * lda + k];
      for (std::size_t r = rows; r < mr; ++r) dst[k * mr + r] = T(0);
    }
    dst += mr * kc;
  }
}

/// Packs rows [0, kc) x cols [0, nc) of op(B) into NR-column panels, k-major, zero-padded.
template <class T>
void pack_b(bool trans, const T* b, std::size_t ldb, std::size_t kc, std::size_t nc, T* dst) {
  constexpr std::size_t nr = gemm_tile<T>::nr;
  for (std::size_t j0 = 0; j0 < nc; j0 += nr) {
    const std::size_t cols = std::min(nr, nc - j0);
    for (std::size_t k = 0; k < kc; ++k) {
      T* d = dst + k * nr;
      if (!trans) {
        std::memcpy(d, b + k * ldb + j0, cols * sizeof(T));
      } else {
        for (std::size_t c = 0; c < cols; ++c) d[c] = b[(j0 + c) * ldb + k];
      }
      for (std::size_t c = cols; c < nr; ++c) d[c] = T(0);
    }
    dst += nr * kc;
  }
}

/// C[0:rows, 0:cols] = alpha * (packed A panel x packed B panel) + beta * C.
template <class T>
void micro_kernel(std::size_t kc, const T* ap, const T* bp, T* c, std::size_t ldc, std::size_t rows, std::size_t cols,
                  T alpha, T beta) {
  using tile = gemm_tile<T>;
  using vec = typename tile::vec;
  constexpr std::size_t mr = tile::mr, nr = tile::nr;
  vec acc[mr] = {};
  for (std::size_t k = 0; k < kc; ++k) {
    vec b;
    std::memcpy(&b, bp + k * nr, sizeof(vec));
    for (std::size_t r = 0; r < mr; ++r) acc[r] += ap[k * mr + r] * b;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    T out[nr];
    std::memcpy(out, &acc[r], sizeof(vec));
    T* crow = c + r * ldc;
    if (beta == T(0)) {
      for (std::size_t j = 0; j < cols; ++j) crow[j] = alpha * out[j];
    } else {
      for (std::size_t j = 0; j < cols; ++j) crow[j] = alpha * out[j] + beta * crow[j];
    }
  }
}

} // namespace detail

/// Row-major GEMM. `lda`, `ldb`, `ldc` are row strides of A, B, C as stored (before op()).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  using tile = detail::gemm_tile<T>;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  HostBuffer<T>& apack = detail::pack_buffer<T>(0);
  HostBuffer<T>& bpack = detail::pack_buffer<T>(1);
  apack.resize(detail::round_up_to(tile::mc, tile::mr) * tile::kc);
  bpack.resize(detail::round_up_to(std::min(n, tile::nc), tile::nr) * tile::kc);

  for (std::size_t j0 = 0; j0 < n; j0 += tile::nc) {
    const std::size_t nc = std::min(tile::nc, n - j0);
    for (std::size_t k0 = 0; k0 < k; k0 += tile::kc) {
      const std::size_t kc = std::min(tile::kc, k - k0);
      const T beta_here = k0 == 0 ? beta : T(1);
      const T* bsrc = trans_b ? b + j0 * ldb + k0 : b + k0 * ldb + j0;
      detail::pack_b(trans_b, bsrc, ldb, kc, nc, bpack.data());
      for (std::size_t i0 = 0; i0 < m; i0 += tile::mc) {
        const std::size_t mc = std::min(tile::mc, m - i0);
        const T* asrc = trans_a ? a + k0 * lda + i0 : a + i0 * lda + k0;
        detail::pack_a(trans_a, asrc, lda, mc, kc, apack.data());
        for (std::size_t jr = 0; jr < nc; jr += tile::nr) {
          for (std::size_t ir = 0; ir < mc; ir += tile::mr) {
            detail::micro_kernel(kc, apack.data() + ir * kc, bpack.data() + jr * kc, c + (i0 + ir) * ldc + (j0 + jr),
                                 ldc, std::min(tile::mr, mc - ir), std::min(tile::nr, nc - jr), alpha, beta_here);
          }
        }
      }
    }
  }
}

/// The same product with the rows (or, when there are too few rows, the columns) of C split
/// between the pool's threads. Every element of C is computed exactly as by the serial gemm, so
/// the result does not depend on the thread count.
template <class T>
void gemm(ThreadPool& pool, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  using tile = detail::gemm_tile<T>;
  const std::size_t threads = pool.size();
  // Enough work per task to amortise packing B (or A) again in every task.
  const bool split_rows = m >= 4 * tile::mr * threads || m >= n;
  if (threads == 1 || m * n * k < 32 * 1024) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (split_rows) {
    const std::size_t rows = detail::round_up_to((m + threads - 1) / threads, tile::mr);
    pool.parallel_for(m, rows, [&](std::size_t lo, std::size_t hi) {
      gemm(trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc,
           ldc);
    });
  } else {
    const std::size_t cols = detail::round_up_to((n + threads - 1) / threads, tile::nr);
    pool.parallel_for(n, cols, [&](std::size_t lo, std::size_t hi) {
      gemm(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    });
  }
}

} // namespace cohort::cpu
