#pragma once
/// \file
/// The GEMM seam of the device backends: every Conv2d and Linear product goes through
/// `ctx.gemm(GemmArgs{...})`, so each backend brings its own: cuBLAS on CUDA
/// (backend/cuda/cublas_gemm.cuh), and on the CPU device systems `thrust_gemm` below, a Thrust
/// reference GEMM over the same functor style as the other device kernels.
///
/// Matrices are row-major, as everything in cohort (cuBLAS is column-major: the CUDA backend
/// swaps operands). Inputs may be 16-bit; products are summed in the accumulator type (float for
/// the 16-bit types), then scaled and rounded once to the output type.

#include <cstddef>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

/// C = alpha * op(A) * op(B) + beta * C for `count` matrices at the given strides
/// (op(A) is m x k, op(B) k x n, C m x n). beta == 0 never reads C.
template <class In, class Out>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  std::size_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const In* a = nullptr;
  std::size_t lda = 0;
  const In* b = nullptr;
  std::size_t ldb = 0;
  float beta = 0;
  Out* c = nullptr;
  std::size_t ldc = 0;
  std::size_t count = 1;
  std::size_t stride_a = 0, stride_b = 0, stride_c = 0;
};

namespace detail {
/// A tile of C per index: up to `rows` x `width` elements (matrix, row block, column block).
/// Each element is summed as a plain loop would sum it, p = 0, 1, ..., k - 1, one product added
/// at a time in the accumulator type; the tile only keeps rows x width such sums in flight (the
/// compiler puts a row of them in one vector) and converts each op(B) element once per tile, not
/// once per row. So the results are bitwise those of one element per index, for any thread count
/// (tests/backend/device/gemm.cpp). One element per index, with the layouts decided in the inner
/// loop, took 85% of the device test suite's time on the CPU (issue 32).
template <class In, class Out>
struct GemmTile {
  static constexpr std::size_t rows = 4, width = 16;
  GemmArgs<In, Out> g;
  std::size_t row_blocks, col_blocks; // ceil(m / rows), ceil(n / width)
  COHORT_HOST_DEVICE void operator()(std::size_t index) const {
    using A = accumulator_t<In>;
    const std::size_t per = row_blocks * col_blocks, q = index / per;
    const std::size_t r0 = index % per / col_blocks * rows, c0 = index % col_blocks * width;
    const std::size_t nr = g.m - r0 < rows ? g.m - r0 : rows, nc = g.n - c0 < width ? g.n - c0 : width;
    // op(A)(r, p) = a[r * a_row + p * a_col], op(B)(p, c) = b[p * b_row + c * b_col].
    const In* a = g.a + q * g.stride_a + (g.trans_a ? r0 : r0 * g.lda);
    const std::size_t a_row = g.trans_a ? 1 : g.lda, a_col = g.trans_a ? g.lda : 1;
    const In* b = g.b + q * g.stride_b + (g.trans_b ? c0 * g.ldb : c0);
    const std::size_t b_row = g.trans_b ? 1 : g.ldb, b_col = g.trans_b ? g.ldb : 1;
    A sum[rows][width] = {};
    A y[width] = {}; // op(B)'s row p in the tile's columns; the lanes past nc stay 0 and are never stored
    for (std::size_t p = 0; p < g.k; ++p) {
      for (std::size_t j = 0; j < nc; ++j) y[j] = A(b[p * b_row + j * b_col]);
      for (std::size_t i = 0; i < nr; ++i) {
        const A x = A(a[i * a_row + p * a_col]);
        COHORT_SIMD_LOOP
        for (std::size_t j = 0; j < width; ++j) sum[i][j] += x * y[j];
      }
    }
    for (std::size_t i = 0; i < nr; ++i) {
      Out* out = g.c + q * g.stride_c + (r0 + i) * g.ldc + c0;
      for (std::size_t j = 0; j < nc; ++j) {
        const A scaled = A(g.alpha) * sum[i][j];
        out[j] = Out(g.beta == 0.f ? scaled : scaled + A(g.beta) * A(out[j]));
      }
    }
  }
};
} // namespace detail

/// The reference GEMM as a Thrust algorithm: what the CPU device systems run (the CPU backend's
/// own GEMM is not reused, so the device suite checks an independent implementation).
template <class Policy, class In, class Out>
void thrust_gemm(Policy&& policy, const GemmArgs<In, Out>& g) {
  if (g.m == 0 || g.n == 0) return;
  using Tile = detail::GemmTile<In, Out>;
  const std::size_t row_blocks = (g.m + Tile::rows - 1) / Tile::rows,
                    col_blocks = (g.n + Tile::width - 1) / Tile::width;
  for_each_index(policy, g.count * row_blocks * col_blocks, Tile{g, row_blocks, col_blocks});
}

} // namespace cohort::device
