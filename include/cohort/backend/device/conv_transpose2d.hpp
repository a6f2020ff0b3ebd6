#pragma once
/// \file
/// ConvTranspose2d on a device backend, as the three passes of the convolution it transposes
/// (the geometry's `adjoint`) through device::Conv2dKernels' im2col + GEMM:
///
///     forward   y  = col2im(W^T x x permuted) + b    the adjoint's input-gradient steps
///     backward  dx = W x im2col(dy)                  the adjoint's forward pass, no bias
///               dw = x permuted x im2col(dy)^T       the adjoint's weight gradient
///
/// The forward pass runs the adjoint's input-gradient steps itself so that the col2im adds the
/// bias before its one rounding. The adjoint's backward reads the patches its forward left in
/// the workspace (cols), so the backward pass runs that forward (or, without dx, the im2col
/// alone) first. The bias gradient is a SegmentedSum over each channel's samples and pixels, the
/// same tree on every device system.

#include <cstddef>

#include "cohort/backend/device/conv2d.hpp"
#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/gemm.hpp"
#include "cohort/backend/device/segmented_sum.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// Term j of channel-major sums over (batch, channels, plane) data: channel j / (batch * plane),
/// then its samples and pixels in order.
template <class G, class T>
struct ChannelTerm {
  const T* dy;
  std::size_t batch;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const {
    constexpr std::size_t P = G::out_plane;
    const std::size_t per_channel = batch * P, o = j / per_channel, n = j % per_channel / P, p = j % P;
    return double(accumulator_t<T>(dy[n * G::out_size + o * P + p]));
  }
};
} // namespace detail

template <class Backend>
struct ConvTranspose2dKernels {
  using context = typename Backend::context;
  using Conv = device::Conv2dKernels<Backend>;

  template <class G, class T>
  struct workspace {
    typename Conv::template workspace<typename G::adjoint, T> conv;
    SegmentedSum bias_sums;
    DeviceBuffer<double> bias_sum; // (out_channels)
    void reserve(std::size_t batch) { conv.reserve(batch); }
  };

  /// y = col2im(W^T x xt) + b, xt the input channel-major (the adjoint's dY^t).
  template <class G, class T>
  static void forward(context& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>& ws) {
    using A = typename G::adjoint;
    using Acc = accumulator_t<T>;
    const std::size_t np = batch * A::out_plane;
    ws.conv.dyt.resize_uninitialized(A::out_channels * np);
    for_each_index(ctx.policy(), A::out_channels * np,
                   detail::ToChannelMajor<A, T>{x, static_cast<const T*>(nullptr), ws.conv.dyt.data(), batch});
    ws.conv.scratch.resize_uninitialized(A::patch * np);
    ctx.gemm(GemmArgs<T, Acc>{.trans_a = true,
                              .m = A::patch,
                              .n = np,
                              .k = A::out_channels,
                              .alpha = 1,
                              .a = w,
                              .lda = A::patch,
                              .b = ws.conv.dyt.data(),
                              .ldb = np,
                              .beta = 0,
                              .c = ws.conv.scratch.data(),
                              .ldc = np});
    for_each_index(ctx.policy(), batch * A::in_size, detail::Col2Im<A, T, Acc>{ws.conv.scratch.data(), y, batch, b});
  }

  template <class G, class T>
  static void backward(context& ctx, const ops::ConvTranspose2dBackwardArgs<T>& a, workspace<G, T>& ws) {
    using A = typename G::adjoint;
    if (a.dx) {
      Conv::template forward<A>(ctx, a.dy, a.w, static_cast<const T*>(nullptr), a.dx, a.batch, ws.conv);
    } else {
      ws.conv.reserve(a.batch);
      for_each_index(ctx.policy(), A::patch * a.batch * A::out_plane,
                     detail::Im2Col<A, T>{a.dy, ws.conv.cols.data(), a.batch});
    }
    Conv::template backward<A>(
        ctx,
        ops::Conv2dBackwardArgs<T>{
            .x = a.dy, .w = a.w, .dy = a.x, .dw = a.dw, .batch = a.batch, .accumulate = a.accumulate},
        ws.conv);
    if (a.db) {
      ws.bias_sum.resize_uninitialized(G::out_channels);
      ws.bias_sums(ctx.policy(), G::out_channels, a.batch * G::out_plane, detail::ChannelTerm<G, T>{a.dy, a.batch},
                   ws.bias_sum.data());
      for_each_index(ctx.policy(), G::out_channels,
                     detail::StoreBiasGradient<accumulator_t<T>>{ws.bias_sum.data(), a.db, a.accumulate});
    }
  }
};

} // namespace cohort::device
