#pragma once
/// \file
/// Upsample on the CPU: nearest and bilinear by an integer scale (backend/upsample_rules.hpp).
/// Planes are split between threads; 16-bit planes are computed in float and rounded once (weights
/// in float, as torch's; double planes in double).
/// Backward adds each output's gradient into its sources in torch's order (outputs row-major;
/// per output the (i0, j0), (i0, j1), (i1, j0), (i1, j1) taps), so a plane's sums are those of
/// torch's CPU kernel and the same for any thread count.

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/backend/upsample_rules.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

namespace cpu::detail {

/// An axis' taps, computed once per geometry at compile time.
template <std::size_t In, std::size_t Scale, bool AlignCorners>
inline constexpr auto linear_taps = [] {
  std::array<cohort::detail::LinearTap, In * Scale> taps{};
  for (std::size_t o = 0; o < In * Scale; ++o) taps[o] = cohort::detail::linear_tap<In, Scale, AlignCorners>(o);
  return taps;
}();

template <class G, class A>
void upsample_plane(const A* in, A* out) {
  if constexpr (G::mode == UpsampleMode::nearest) {
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      const A* row = in + oh / G::scale * G::in_w;
      A* o = out + oh * G::out_w;
      for (std::size_t iw = 0; iw < G::in_w; ++iw)
        for (std::size_t k = 0; k < G::scale; ++k) o[iw * G::scale + k] = row[iw];
    }
  } else {
    constexpr auto& th = linear_taps<G::in_h, G::scale, G::align_corners>;
    constexpr auto& tw = linear_taps<G::in_w, G::scale, G::align_corners>;
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      const A* r0 = in + th[oh].i0 * G::in_w;
      const A* r1 = in + th[oh].i1 * G::in_w;
      const A h0 = th[oh].l0, h1 = th[oh].l1;
      A* o = out + oh * G::out_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) {
        const cohort::detail::LinearTap w = tw[ow];
        const A w0 = w.l0, w1 = w.l1;
        o[ow] = h0 * (w0 * r0[w.i0] + w1 * r0[w.i1]) + h1 * (w0 * r1[w.i0] + w1 * r1[w.i1]);
      }
    }
  }
}

/// dx of one plane from dy (dx is overwritten).
template <class G, class A>
void upsample_plane_backward(const A* dy, A* dx) {
  std::fill(dx, dx + G::in_plane, A(0));
  if constexpr (G::mode == UpsampleMode::nearest) {
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      A* row = dx + oh / G::scale * G::in_w;
      const A* g = dy + oh * G::out_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) row[ow / G::scale] += g[ow];
    }
  } else {
    constexpr auto& th = linear_taps<G::in_h, G::scale, G::align_corners>;
    constexpr auto& tw = linear_taps<G::in_w, G::scale, G::align_corners>;
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      A* r0 = dx + th[oh].i0 * G::in_w;
      A* r1 = dx + th[oh].i1 * G::in_w;
      const A h0 = th[oh].l0, h1 = th[oh].l1;
      const A* g = dy + oh * G::out_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) {
        const cohort::detail::LinearTap w = tw[ow];
        const A w0 = w.l0, w1 = w.l1;
        r0[w.i0] += h0 * w0 * g[ow];
        r0[w.i1] += h0 * w1 * g[ow];
        r1[w.i0] += h1 * w0 * g[ow];
        r1[w.i1] += h1 * w1 * g[ow];
      }
    }
  }
}

} // namespace cpu::detail

template <>
struct ops::UpsampleKernels<Cpu> {
  /// y = Upsample(x) for `batch` samples of geometry G (an UpsampleGeometry).
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, T* y, std::size_t batch) {
    each_plane<G::in_plane, G::out_plane>(ctx, x, y, batch * G::channels,
                                          [](const auto* in, auto* out) { cpu::detail::upsample_plane<G>(in, out); });
  }
  /// dx = the input gradient of Upsample for the output gradient dy (dx overwritten).
  template <class G, class T>
  static void backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch) {
    each_plane<G::out_plane, G::in_plane>(ctx, dy, dx, batch * G::channels, [](const auto* in, auto* out) {
      cpu::detail::upsample_plane_backward<G>(in, out);
    });
  }

 private:
  /// fn(src plane, dst plane) on every plane, split between threads; 16-bit planes through float.
  template <std::size_t InPlane, std::size_t OutPlane, class T, class Fn>
  static void each_plane(CpuContext& ctx, const T* src, T* dst, std::size_t planes, Fn fn) {
    const Isa isa = cpu::active_isa();
    const std::size_t grain = std::max<std::size_t>(1, 16384 / (InPlane + OutPlane));
    ctx.threads().parallel_for(planes, grain, [src, dst, isa, fn](std::size_t p0, std::size_t p1) {
      for (std::size_t p = p0; p < p1; ++p) {
        if constexpr (std::is_same_v<T, accumulator_t<T>>) { // float, double
          fn(src + p * InPlane, dst + p * OutPlane);
        } else {
          float* in = cpu::convert_scratch(0, InPlane);
          float* out = cpu::convert_scratch(1, OutPlane);
          cpu::load_floats(isa, src + p * InPlane, in, InPlane);
          fn(in, out);
          cpu::store_floats(isa, out, dst + p * OutPlane, OutPlane);
        }
      }
    });
  }
};

} // namespace cohort
