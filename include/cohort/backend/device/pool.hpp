#pragma once
/// \file
/// MaxPool2d on a device backend: one output per index forward (saving the argmax), one input
/// element per index backward. Backward gathers from the windows that cover an element instead
/// of scattering into it, so overlapping windows need no atomics and sums run in a fixed order
/// (row-major over the windows, as the CPU backend adds them).

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

template <class G, class T>
struct MaxPoolBackward {
  const T* dy;
  const std::uint32_t* argmax;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    constexpr long K = long(G::kernel), S = long(G::stride), P = long(G::padding);
    const std::size_t plane = i / in_plane, at = i % in_plane;
    const long h = long(at / G::in_w), w = long(at % G::in_w);
    // Windows oh with oh*S - P <= h < oh*S - P + K, i.e. (h + P - K) / S < oh <= (h + P) / S.
    const long oh_hi = (h + P) / S, ow_hi = (w + P) / S;
    const long oh_lo = h + P - K < 0 ? 0 : (h + P - K) / S + 1, ow_lo = w + P - K < 0 ? 0 : (w + P - K) / S + 1;
    A sum = 0;
    for (long oh = oh_lo; oh <= oh_hi && oh < long(G::out_h); ++oh)
      for (long ow = ow_lo; ow <= ow_hi && ow < long(G::out_w); ++ow) {
        const std::size_t o = plane * out_plane + std::size_t(oh) * G::out_w + std::size_t(ow);
        if (argmax[o] == std::uint32_t(at)) sum += A(dy[o]);
      }
    dx[i] = T(sum);
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
    void reserve(std::size_t batch) { argmax.resize(batch * G::out_size); }
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
};

} // namespace cohort::device
