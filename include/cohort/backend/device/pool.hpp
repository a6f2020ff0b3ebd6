#pragma once
/// \file
/// Pooling on a device backend: MaxPool2d, AvgPool2d and global average pooling
/// (AdaptiveAvgPool2d<1>). One output per index forward (max-pool saving the argmax), one input
/// element per index backward. Backward gathers from the windows that cover an element instead
/// of scattering into it, so overlapping windows need no atomics and sums run in a fixed order
/// (row-major over the windows, as the CPU backend and PyTorch add them).

#include <cstddef>
#include <cstdint>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/math.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
template <class G, class T>
struct MaxPoolForward {
  const T* x;
  T* y;
  std::uint32_t* argmax;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    const std::size_t plane = i / out_plane, oh = i % out_plane / G::out_w, ow = i % G::out_w;
    const T* in = x + plane * in_plane;
    const long h0 = long(oh * G::stride) - long(G::padding), w0 = long(ow * G::stride) - long(G::padding);
    A best = 0;
    std::uint32_t at = 0;
    bool first = true;
    for (long h = h0 < 0 ? 0 : h0; h < h0 + long(G::kernel) && h < long(G::in_h); ++h)
      for (long w = w0 < 0 ? 0 : w0; w < w0 + long(G::kernel) && w < long(G::in_w); ++w) {
        const A v = A(in[h * long(G::in_w) + w]);
        if (first || math::takes_max(v, best)) {
          best = v;
          at = std::uint32_t(h * long(G::in_w) + w);
          first = false;
        }
      }
    y[i] = T(best);
    argmax[i] = at;
  }
};

/// The windows (oh, ow) that cover input element (h, w): oh in [oh_lo, oh_hi], ow likewise
/// (clipped to the output by the callers' loops).
template <class G>
struct CoveringWindows {
  long oh_lo, oh_hi, ow_lo, ow_hi;
  COHORT_HOST_DEVICE CoveringWindows(long h, long w) {
    constexpr long K = long(G::kernel), S = long(G::stride), P = long(G::padding);
    // Windows oh with oh*S - P <= h < oh*S - P + K, i.e. (h + P - K) / S < oh <= (h + P) / S.
    oh_hi = (h + P) / S;
    ow_hi = (w + P) / S;
    oh_lo = h + P - K < 0 ? 0 : (h + P - K) / S + 1;
    ow_lo = w + P - K < 0 ? 0 : (w + P - K) / S + 1;
  }
};

template <class G, class T>
struct MaxPoolBackward {
  const T* dy;
  const std::uint32_t* argmax;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    const std::size_t plane = i / in_plane, at = i % in_plane;
    const CoveringWindows<G> win(long(at / G::in_w), long(at % G::in_w));
    A sum = 0;
    for (long oh = win.oh_lo; oh <= win.oh_hi && oh < long(G::out_h); ++oh)
      for (long ow = win.ow_lo; ow <= win.ow_hi && ow < long(G::out_w); ++ow) {
        const std::size_t o = plane * out_plane + std::size_t(oh) * G::out_w + std::size_t(ow);
        if (argmax[o] == std::uint32_t(at)) sum += A(dy[o]);
      }
    dx[i] = T(sum);
  }
};

/// AvgPool2d (count_include_pad): the window's sum in row-major order, divided by K*K.
template <class G, class T>
struct AvgPoolForward {
  const T* x;
  T* y;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    const std::size_t plane = i / out_plane, oh = i % out_plane / G::out_w, ow = i % G::out_w;
    const T* in = x + plane * in_plane;
    const long h0 = long(oh * G::stride) - long(G::padding), w0 = long(ow * G::stride) - long(G::padding);
    A sum = 0;
    for (long h = h0 < 0 ? 0 : h0; h < h0 + long(G::kernel) && h < long(G::in_h); ++h)
      for (long w = w0 < 0 ? 0 : w0; w < w0 + long(G::kernel) && w < long(G::in_w); ++w)
        sum += A(in[h * long(G::in_w) + w]);
    y[i] = T(sum / A(G::kernel * G::kernel));
  }
};
/// dx = the sum of dy / (K*K) over the windows covering the element, in row-major window order.
template <class G, class T>
struct AvgPoolBackward {
  const T* dy;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    const std::size_t plane = i / in_plane, at = i % in_plane;
    const CoveringWindows<G> win(long(at / G::in_w), long(at % G::in_w));
    A sum = 0;
    for (long oh = win.oh_lo; oh <= win.oh_hi && oh < long(G::out_h); ++oh)
      for (long ow = win.ow_lo; ow <= win.ow_hi && ow < long(G::out_w); ++ow)
        sum += A(dy[plane * out_plane + std::size_t(oh) * G::out_w + std::size_t(ow)]) / A(G::kernel * G::kernel);
    dx[i] = T(sum);
  }
};

/// Global average pooling (G: a ChannelGeometry): a plane's sum in double, in order, then / plane.
template <class G, class T>
struct GlobalAvgForward {
  const T* x;
  T* y;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    double sum = 0;
    for (std::size_t p = 0; p < G::plane; ++p) sum += double(A(x[i * G::plane + p]));
    y[i] = T(A(sum / double(G::plane)));
  }
};
template <class G, class T>
struct GlobalAvgBackward {
  const T* dy;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    dx[i] = T(A(dy[i / G::plane]) / A(G::plane));
  }
};
} // namespace detail

/// ops::PoolKernels for a device backend.
template <class Backend>
struct PoolKernels {
  using context = typename Backend::context;
  template <class G, class T>
  struct workspace {
    DeviceBuffer<std::uint32_t> argmax; // (batch, C, out_h, out_w): index into the input plane
    // The forward pass writes every entry: no zeroing when the batch size comes back up.
    void reserve(std::size_t batch) { argmax.resize_uninitialized(batch * G::out_size); }
  };

  template <class G, class T>
  static void max_forward(context& ctx, const T* x, T* y, std::size_t batch, workspace<G, T>& ws) {
    ws.reserve(batch);
    for_each_index(ctx.policy(), batch * G::out_size, detail::MaxPoolForward<G, T>{x, y, ws.argmax.data()});
  }
  template <class G, class T>
  static void max_backward(context& ctx, const T* dy, T* dx, std::size_t batch, workspace<G, T>& ws) {
    for_each_index(ctx.policy(), batch * G::in_size, detail::MaxPoolBackward<G, T>{dy, ws.argmax.data(), dx});
  }
  template <class G, class T>
  static void avg_forward(context& ctx, const T* x, T* y, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::out_size, detail::AvgPoolForward<G, T>{x, y});
  }
  template <class G, class T>
  static void avg_backward(context& ctx, const T* dy, T* dx, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::in_size, detail::AvgPoolBackward<G, T>{dy, dx});
  }
  /// G: a ChannelGeometry (one window per plane).
  template <class G, class T>
  static void global_avg_forward(context& ctx, const T* x, T* y, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::channels, detail::GlobalAvgForward<G, T>{x, y});
  }
  template <class G, class T>
  static void global_avg_backward(context& ctx, const T* dy, T* dx, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::size, detail::GlobalAvgBackward<G, T>{dy, dx});
  }
};

} // namespace cohort::device
