#pragma once
/// \file
/// Linear on a device backend: three GEMMs through the backend's seam (cuBLAS on CUDA) and a
/// bias broadcast / column sum as Thrust functors.

#include <cstddef>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/gemm.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// y[n, o] = b[o] (the forward GEMM then adds x W^T).
template <class T>
struct BroadcastRows {
  const T* row;
  T* y;
  std::size_t cols;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const { y[i] = row[i % cols]; }
};
/// out[c] (+)= sum_n in[n, c], in the accumulator type, rows in order.
template <class T, class A>
struct ColumnSum {
  const T* in;
  std::size_t rows, cols;
  A* out;
  bool accumulate;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    A sum = accumulate ? out[c] : A(0);
    for (std::size_t n = 0; n < rows; ++n) sum += A(in[n * cols + c]);
    out[c] = sum;
  }
};
} // namespace detail

/// ops::LinearKernels for a device backend.
template <class Backend>
struct LinearKernels {
  using context = typename Backend::context;
  template <std::size_t In, std::size_t Out, class T>
  struct workspace {
    void reserve(std::size_t) noexcept {}
  };

  /// y (batch, Out) = b + x (batch, In) W^T.
  template <std::size_t In, std::size_t Out, class T>
  static void forward(context& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<In, Out, T>&) {
    for_each_index(ctx.policy(), batch * Out, detail::BroadcastRows<T>{b, y, Out});
    ctx.gemm(GemmArgs<T, T>{.trans_a = false,
                            .trans_b = true,
                            .m = batch,
                            .n = Out,
                            .k = In,
                            .alpha = 1,
                            .a = x,
                            .lda = In,
                            .b = w,
                            .ldb = In,
                            .beta = 1,
                            .c = y,
                            .ldc = Out});
  }

  /// dW (Out, In) = dY^T x and db in the accumulator type; dx (batch, In) = dY W when wanted.
  template <std::size_t In, std::size_t Out, class T>
  static void backward(context& ctx, const ops::LinearBackwardArgs<T>& args, workspace<In, Out, T>&) {
    using A = accumulator_t<T>;
    const T *x = args.x, *w = args.w, *dy = args.dy;
    T* dx = args.dx;
    A *dw = args.dw, *db = args.db;
    const std::size_t batch = args.batch;
    const bool accumulate = args.accumulate;
    ctx.gemm(GemmArgs<T, A>{.trans_a = true,
                            .trans_b = false,
                            .m = Out,
                            .n = In,
                            .k = batch,
                            .alpha = 1,
                            .a = dy,
                            .lda = Out,
                            .b = x,
                            .ldb = In,
                            .beta = accumulate ? 1.f : 0.f,
                            .c = dw,
                            .ldc = In});
    for_each_index(ctx.policy(), Out, detail::ColumnSum<T, A>{dy, batch, Out, db, accumulate});
    if (dx)
      ctx.gemm(GemmArgs<T, T>{.trans_a = false,
                              .trans_b = false,
                              .m = batch,
                              .n = In,
                              .k = Out,
                              .alpha = 1,
                              .a = dy,
                              .lda = Out,
                              .b = w,
                              .ldb = In,
                              .beta = 0,
                              .c = dx,
                              .ldc = In});
  }
};

} // namespace cohort::device
