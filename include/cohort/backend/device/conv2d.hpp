#pragma once
/// \file
/// Conv2d on a device backend as im2col + GEMM, the layout cuDNN-less GPU frameworks use
/// (Caffe's): the whole batch's patches form one matrix cols (patch, batch * out_plane), so each
/// pass is one large GEMM through the backend's seam (cuBLAS on CUDA) instead of one per sample.
///
///     forward   Yt (OutC, N*P)   = W (OutC, patch) x cols        then y[n, o, p] = Yt[o, n*P + p] + b[o]
///     backward  dYt (OutC, N*P)  = dy permuted (ReLU mask applied when fused)
///               dW               = dYt x cols^T,   db = row sums of dYt (device::SegmentedSum)
///               dcols            = W^T x dYt,      dx = col2im(dcols), gathered per input element
///
/// A following ReLU is fused (applied in the permutes); the max-pool is not. A null bias
/// (Conv2d<..., false>) is none: nothing added, no row sums, no db.

#include <cstddef>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/gemm.hpp"
#include "cohort/backend/device/segmented_sum.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// cols[r, n*P + p] = the input under tap r of output position p of sample n (0 in the padding).
template <class G, class T>
struct Im2Col {
  const T* x;
  T* cols;
  std::size_t batch;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    constexpr std::size_t P = G::out_plane, K = G::kernel;
    const std::size_t np = batch * P, r = i / np, n = i % np / P, p = i % P;
    const std::size_t c = r / (K * K), kh = r / K % K, kw = r % K;
    const long h = long(p / G::out_w * G::stride + kh) - long(G::padding);
    const long w = long(p % G::out_w * G::stride + kw) - long(G::padding);
    const bool inside = h >= 0 && h < long(G::in_h) && w >= 0 && w < long(G::in_w);
    cols[i] = inside ? x[n * G::in_size + c * G::in_h * G::in_w + std::size_t(h) * G::in_w + std::size_t(w)] : T(0);
  }
};
/// y[n, o, p] = T(Yt[o, n*P + p] + b[o]) (without b[o] when bias is null), max(., 0) when a ReLU is
/// fused.
template <class G, class T, class A>
struct FromChannelMajor {
  const A* yt;
  const T* bias;
  T* y;
  std::size_t batch;
  bool relu;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    constexpr std::size_t P = G::out_plane;
    const std::size_t n = i / G::out_size, o = i % G::out_size / P, p = i % P;
    const A v = bias ? yt[o * batch * P + n * P + p] + A(bias[o]) : yt[o * batch * P + n * P + p];
    y[i] = T(relu && !(v > A(0)) ? A(0) : v);
  }
};
/// dYt[o, n*P + p] = dy[n, o, p], or 0 where a fused ReLU's output relu_y is not positive.
template <class G, class T>
struct ToChannelMajor {
  const T* dy;
  const T* relu_y;
  T* dyt;
  std::size_t batch;
  COHORT_HOST_DEVICE void operator()(std::size_t j) const {
    constexpr std::size_t P = G::out_plane;
    const std::size_t np = batch * P, o = j / np, n = j % np / P, p = j % P;
    const std::size_t i = n * G::out_size + o * P + p;
    dyt[j] = relu_y && !(accumulator_t<T>(relu_y[i]) > 0) ? T(0) : dy[i];
  }
};
/// A term of the bias gradient's row sums: element j of dYt, widened to double.
template <class T>
struct DoubleOf {
  const T* in;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const { return double(float(in[j])); }
};
/// out[o] (+)= sums[o]: the row sums of dYt (double) into the bias gradient.
template <class A>
struct StoreBiasGradient {
  const double* sums;
  A* out;
  bool accumulate;
  COHORT_HOST_DEVICE void operator()(std::size_t o) const {
    out[o] = accumulate ? A(double(out[o]) + sums[o]) : A(sums[o]);
  }
};
/// dx[n, c, h, w] = the sum of dcols over every (tap, output position) that read it, plus
/// bias[c] when there is one (ConvTranspose2d's, added before the one rounding).
template <class G, class T, class A>
struct Col2Im {
  const A* dcols;
  T* dx;
  std::size_t batch;
  const T* bias = nullptr;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    constexpr std::size_t P = G::out_plane, K = G::kernel, S = G::stride;
    const std::size_t np = batch * P, n = i / G::in_size, c = i % G::in_size / (G::in_h * G::in_w);
    const std::size_t h = i % (G::in_h * G::in_w) / G::in_w, w = i % G::in_w;
    A sum = 0;
    for (std::size_t kh = 0; kh < K; ++kh) {
      const long oh_s = long(h + G::padding) - long(kh); // oh * stride
      if (oh_s < 0 || oh_s % long(S) != 0 || oh_s / long(S) >= long(G::out_h)) continue;
      for (std::size_t kw = 0; kw < K; ++kw) {
        const long ow_s = long(w + G::padding) - long(kw);
        if (ow_s < 0 || ow_s % long(S) != 0 || ow_s / long(S) >= long(G::out_w)) continue;
        const std::size_t r = (c * K + kh) * K + kw,
                          p = std::size_t(oh_s / long(S)) * G::out_w + std::size_t(ow_s / long(S));
        sum += dcols[r * np + n * P + p];
      }
    }
    dx[i] = T(bias ? sum + A(bias[c]) : sum);
  }
};
} // namespace detail

/// ops::Conv2dKernels for a device backend.
template <class Backend>
struct Conv2dKernels {
  using context = typename Backend::context;

  /// The patch matrix of the last forward pass (backward reuses it) and the channel-major
  /// scratch both passes permute through. Each is written whole (im2col, a permute, a GEMM with
  /// beta 0) before it is read, so they are sized without zeroing: scratch alternates between
  /// two sizes within every step, and a zeroing resize would fill its larger size each time.
  template <class G, class T>
  struct workspace {
    DeviceBuffer<T> cols;                   // (patch, batch * out_plane)
    DeviceBuffer<accumulator_t<T>> scratch; // forward Yt (OutC, N*P) / backward dcols (patch, N*P)
    DeviceBuffer<T> dyt;                    // (OutC, batch * out_plane)
    // db's row sums of dYt: blocks of consecutive terms over thousands of threads, then the
    // blocks in order (one thread per channel summing batch * out_plane terms took 4.6 ms a
    // step of model A on an H200, more than the rest of the step).
    SegmentedSum bias_sums;
    DeviceBuffer<double> bias_sum; // (OutC)
    void reserve(std::size_t batch) { cols.resize_uninitialized(G::patch * batch * G::out_plane); }
  };

  template <class G, class T>
  static constexpr bool fuses_relu = true;
  template <class G, class PG, class T>
  static constexpr bool fuses_relu_pool = false;

  template <class G, class T>
  static void forward(context& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>& ws,
                      bool relu = false) {
    using A = accumulator_t<T>;
    const std::size_t np = batch * G::out_plane;
    ws.reserve(batch);
    ws.scratch.resize_uninitialized(G::out_channels * np);
    for_each_index(ctx.policy(), G::patch * np, detail::Im2Col<G, T>{x, ws.cols.data(), batch});
    ctx.gemm(GemmArgs<T, A>{.m = G::out_channels,
                            .n = np,
                            .k = G::patch,
                            .alpha = 1,
                            .a = w,
                            .lda = G::patch,
                            .b = ws.cols.data(),
                            .ldb = np,
                            .beta = 0,
                            .c = ws.scratch.data(),
                            .ldc = np});
    for_each_index(ctx.policy(), batch * G::out_size,
                   detail::FromChannelMajor<G, T, A>{ws.scratch.data(), b, y, batch, relu});
  }

  /// Gradients of input, weights and bias (ops/op_arguments.hpp). `a.x` is not read: forward
  /// left its patches in ws.cols.
  template <class G, class T>
  static void backward(context& ctx, const ops::Conv2dBackwardArgs<T>& a, workspace<G, T>& ws) {
    using A = accumulator_t<T>;
    const T *w = a.w, *dy = a.dy, *relu_y = a.relu_y;
    T* dx = a.dx;
    A *dw = a.dw, *db = a.db;
    const std::size_t batch = a.batch;
    const bool accumulate = a.accumulate;
    const std::size_t np = batch * G::out_plane;
    ws.dyt.resize_uninitialized(G::out_channels * np);
    for_each_index(ctx.policy(), G::out_channels * np, detail::ToChannelMajor<G, T>{dy, relu_y, ws.dyt.data(), batch});
    if (db) {
      ws.bias_sum.resize_uninitialized(G::out_channels);
      ws.bias_sums(ctx.policy(), G::out_channels, np, detail::DoubleOf<T>{ws.dyt.data()}, ws.bias_sum.data());
      for_each_index(ctx.policy(), G::out_channels, detail::StoreBiasGradient<A>{ws.bias_sum.data(), db, accumulate});
    }
    if (dw)
      ctx.gemm(GemmArgs<T, A>{.trans_b = true,
                              .m = G::out_channels,
                              .n = G::patch,
                              .k = np,
                              .alpha = 1,
                              .a = ws.dyt.data(),
                              .lda = np,
                              .b = ws.cols.data(),
                              .ldb = np,
                              .beta = accumulate ? 1.f : 0.f,
                              .c = dw,
                              .ldc = G::patch});
    if (!dx) return;
    ws.scratch.resize_uninitialized(G::patch * np);
    ctx.gemm(GemmArgs<T, A>{.trans_a = true,
                            .m = G::patch,
                            .n = np,
                            .k = G::out_channels,
                            .alpha = 1,
                            .a = w,
                            .lda = G::patch,
                            .b = ws.dyt.data(),
                            .ldb = np,
                            .beta = 0,
                            .c = ws.scratch.data(),
                            .ldc = np});
    for_each_index(ctx.policy(), batch * G::in_size, detail::Col2Im<G, T, A>{ws.scratch.data(), dx, batch});
  }
};

} // namespace cohort::device
