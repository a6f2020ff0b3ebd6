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
/// One element of C per index: (matrix, row, column).
template <class In, class Out>
struct GemmElement {
  GemmArgs<In, Out> g;
  COHORT_HOST_DEVICE void operator()(std::size_t index) const {
    using A = accumulator_t<In>;
    const std::size_t per = g.m * g.n, q = index / per, r = index % per / g.n, c = index % g.n;
    const In* a = g.a + q * g.stride_a;
    const In* b = g.b + q * g.stride_b;
    A sum = 0;
    for (std::size_t p = 0; p < g.k; ++p) {
      const A x = A(g.trans_a ? a[p * g.lda + r] : a[r * g.lda + p]);
      const A y = A(g.trans_b ? b[c * g.ldb + p] : b[p * g.ldb + c]);
      sum += x * y;
    }
    Out& out = g.c[q * g.stride_c + r * g.ldc + c];
    const A scaled = A(g.alpha) * sum;
    out = Out(g.beta == 0.f ? scaled : scaled + A(g.beta) * A(out));
  }
};
} // namespace detail

/// The reference GEMM as a Thrust algorithm: what the CPU device systems run (the CPU backend's
/// own GEMM is not reused, so the device suite checks an independent implementation).
template <class Policy, class In, class Out>
void thrust_gemm(Policy&& policy, const GemmArgs<In, Out>& g) {
  for_each_index(policy, g.count * g.m * g.n, detail::GemmElement<In, Out>{g});
}

} // namespace cohort::device
