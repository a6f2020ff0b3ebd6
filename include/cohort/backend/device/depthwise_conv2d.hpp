#pragma once
/// \file
/// Depthwise convolution on a device backend (layers/depthwise_conv2d.hpp): one functor call per
/// output element (forward), per input element (input gradient, gathering from the windows that
/// cover it: no atomics) and per weight or bias element (summing over the batch and the image in
/// a fixed order), in the accumulator type.

#include <cstddef>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/pool.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
template <class G, class T>
struct DepthwiseForward {
  const T* x;
  const T* w;
  const T* b;
  T* y;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr long K = long(G::kernel), S = long(G::stride), P = long(G::padding);
    constexpr std::size_t out_plane = G::out_h * G::out_w;
    const std::size_t plane = i / out_plane, c = plane % G::channels;
    const long oh = long((i % out_plane) / G::out_w), ow = long(i % G::out_w);
    const T* xp = x + plane * G::in_h * G::in_w;
    A sum = b ? A(b[c]) : A(0);
    for (long kh = 0; kh < K; ++kh) {
      const long ih = oh * S + kh - P;
      if (ih < 0 || ih >= long(G::in_h)) continue;
      for (long kw = 0; kw < K; ++kw) {
        const long iw = ow * S + kw - P;
        if (iw < 0 || iw >= long(G::in_w)) continue;
        sum += A(w[c * K * K + kh * K + kw]) * A(xp[ih * long(G::in_w) + iw]);
      }
    }
    y[i] = T(sum);
  }
};

template <class G, class T>
struct DepthwiseInputGrad {
  const T* w;
  const T* dy;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr long K = long(G::kernel), S = long(G::stride), P = long(G::padding);
    constexpr std::size_t in_plane = G::in_h * G::in_w;
    const std::size_t plane = i / in_plane, c = plane % G::channels;
    const long h = long((i % in_plane) / G::in_w), wc = long(i % G::in_w);
    const CoveringWindows<G> win(h, wc);
    const T* dyp = dy + plane * G::out_h * G::out_w;
    A sum = 0;
    for (long oh = win.oh_lo; oh <= win.oh_hi && oh < long(G::out_h); ++oh)
      for (long ow = win.ow_lo; ow <= win.ow_hi && ow < long(G::out_w); ++ow) {
        const long kh = h - (oh * S - P), kw = wc - (ow * S - P);
        sum += A(w[long(c) * K * K + kh * K + kw]) * A(dyp[oh * long(G::out_w) + ow]);
      }
    dx[i] = T(sum);
  }
};

/// dw[c, kh, kw] for i = c * K * K + kh * K + kw; db[c] for i = C * K * K + c.
template <class G, class T>
struct DepthwiseParamGrad {
  const T* x;
  const T* dy;
  accumulator_t<T>* dw;
  accumulator_t<T>* db;
  std::size_t batch;
  bool accumulate;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr long K = long(G::kernel), S = long(G::stride), P = long(G::padding);
    constexpr std::size_t in_plane = G::in_h * G::in_w, out_plane = G::out_h * G::out_w;
    const bool bias = i >= G::channels * std::size_t(K * K);
    const std::size_t c = bias ? i - G::channels * std::size_t(K * K) : i / std::size_t(K * K);
    const long kh = bias ? 0 : long(i % std::size_t(K * K)) / K, kw = bias ? 0 : long(i % std::size_t(K * K)) % K;
    A sum = 0;
    for (std::size_t n = 0; n < batch; ++n) {
      const std::size_t plane = n * G::channels + c;
      const T* xp = x + plane * in_plane;
      const T* dyp = dy + plane * out_plane;
      for (long oh = 0; oh < long(G::out_h); ++oh)
        for (long ow = 0; ow < long(G::out_w); ++ow) {
          const A g = A(dyp[oh * long(G::out_w) + ow]);
          if (bias) {
            sum += g;
            continue;
          }
          const long ih = oh * S + kh - P, iw = ow * S + kw - P;
          if (ih < 0 || ih >= long(G::in_h) || iw < 0 || iw >= long(G::in_w)) continue;
          sum += g * A(xp[ih * long(G::in_w) + iw]);
        }
    }
    A* out = bias ? db + c : dw + i;
    *out = accumulate ? *out + sum : sum;
  }
};
} // namespace detail

/// ops::DepthwiseConv2dKernels for a device backend (its context supplies `policy()`).
template <class Backend>
struct DepthwiseConv2dKernels {
  using context = typename Backend::context;

  template <class G, class T>
  static void forward(context& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::out_size, detail::DepthwiseForward<G, T>{x, w, b, y});
  }
  template <class G, class T>
  static void backward(context& ctx, const ops::Conv2dBackwardArgs<T>& a) {
    if (a.dx) for_each_index(ctx.policy(), a.batch * G::in_size, detail::DepthwiseInputGrad<G, T>{a.w, a.dy, a.dx});
    const std::size_t params = G::channels * G::kernel * G::kernel + (a.db ? G::channels : 0);
    for_each_index(ctx.policy(), params,
                   detail::DepthwiseParamGrad<G, T>{a.x, a.dy, a.dw, a.db, a.batch, a.accumulate});
  }
};

} // namespace cohort::device
