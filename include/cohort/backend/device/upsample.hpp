#pragma once
/// \file
/// Upsample on a device backend: nearest and bilinear by an integer scale
/// (backend/upsample_rules.hpp). One output element per index forward; one input element per
/// index backward, gathering from the outputs that read it (no atomics) in the order the CPU
/// backend and torch add them: outputs row-major, per output its (i0, j0), (i0, j1), (i1, j0),
/// (i1, j1) taps.

#include <cstddef>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/upsample_rules.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
template <class G, class T>
struct UpsampleForward {
  const T* x;
  T* y;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    const std::size_t plane = i / G::out_plane, oh = i % G::out_plane / G::out_w, ow = i % G::out_w;
    const T* in = x + plane * G::in_plane;
    if constexpr (G::mode == UpsampleMode::nearest) {
      y[i] = in[oh / G::scale * G::in_w + ow / G::scale];
    } else {
      const cohort::detail::LinearTap h = cohort::detail::linear_tap<G::in_h, G::scale, G::align_corners>(oh);
      const cohort::detail::LinearTap w = cohort::detail::linear_tap<G::in_w, G::scale, G::align_corners>(ow);
      const A h0 = h.l0, h1 = h.l1, w0 = w.l0, w1 = w.l1;
      const T* r0 = in + h.i0 * G::in_w;
      const T* r1 = in + h.i1 * G::in_w;
      y[i] = T(h0 * (w0 * A(r0[w.i0]) + w1 * A(r0[w.i1])) + h1 * (w0 * A(r1[w.i0]) + w1 * A(r1[w.i1])));
    }
  }
};

template <class G, class T>
struct UpsampleBackward {
  const T* dy;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    const std::size_t plane = i / G::in_plane, ih = i % G::in_plane / G::in_w, iw = i % G::in_w;
    const T* g = dy + plane * G::out_plane;
    A sum = 0;
    if constexpr (G::mode == UpsampleMode::nearest) {
      for (std::size_t oh = ih * G::scale; oh < (ih + 1) * G::scale; ++oh)
        for (std::size_t ow = iw * G::scale; ow < (iw + 1) * G::scale; ++ow) sum += A(g[oh * G::out_w + ow]);
    } else {
      using Rows = cohort::detail::LinearReaders<G::in_h, G::scale, G::align_corners>;
      using Cols = cohort::detail::LinearReaders<G::in_w, G::scale, G::align_corners>;
      const Rows rows(ih);
      const Cols cols(iw);
      for (std::size_t oh = rows.lo; oh < rows.hi; ++oh) {
        const cohort::detail::LinearTap h = cohort::detail::linear_tap<G::in_h, G::scale, G::align_corners>(oh);
        if (h.i0 != ih && h.i1 != ih) continue;
        const A h0 = h.l0, h1 = h.l1;
        for (std::size_t ow = cols.lo; ow < cols.hi; ++ow) {
          const cohort::detail::LinearTap w = cohort::detail::linear_tap<G::in_w, G::scale, G::align_corners>(ow);
          if (w.i0 != iw && w.i1 != iw) continue;
          const A w0 = w.l0, w1 = w.l1, v = A(g[oh * G::out_w + ow]);
          if (h.i0 == ih && w.i0 == iw) sum += h0 * w0 * v;
          if (h.i0 == ih && w.i1 == iw) sum += h0 * w1 * v;
          if (h.i1 == ih && w.i0 == iw) sum += h1 * w0 * v;
          if (h.i1 == ih && w.i1 == iw) sum += h1 * w1 * v;
        }
      }
    }
    dx[i] = T(sum);
  }
};
} // namespace detail

/// The Upsample family for a device backend tag (ThrustDevice, Cuda).
template <class Backend>
struct UpsampleKernels {
  using context = typename Backend::context;

  template <class G, class T>
  static void forward(context& ctx, const T* x, T* y, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::out_size, detail::UpsampleForward<G, T>{x, y});
  }
  template <class G, class T>
  static void backward(context& ctx, const T* dy, T* dx, std::size_t batch) {
    for_each_index(ctx.policy(), batch * G::in_size, detail::UpsampleBackward<G, T>{dy, dx});
  }
};

} // namespace cohort::device
