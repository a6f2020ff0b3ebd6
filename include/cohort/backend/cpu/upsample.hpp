#pragma once
/// \file
/// Upsample on the CPU: nearest and bilinear by an integer scale (backend/upsample_rules.hpp).
/// Planes are split between threads; 16-bit planes are computed in float and rounded once (weights
/// in float, as torch's; double planes in double).
/// Bilinear runs separably (rows widened once, then blended; backward the transpose), which
/// the U-Net's profile asked for: the per-output 4-tap loops were 11% of its step. Forward
/// evaluates torch's expression per output; backward sums in another order than torch's (within
/// rounding), the same for any thread count, as planes never share a thread's sums.

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

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

/// Per-thread room for a plane's intermediate rows (grows, never shrinks).
template <class A>
A* plane_scratch(std::size_t n) {
  thread_local std::vector<A> room;
  if (room.size() < n) room.resize(n);
  return room.data();
}

/// One input row interpolated along the width: out_w values, each w0 * a + w1 * b.
template <class G, class A>
void widen_row(const A* __restrict row, A* __restrict out) {
  constexpr auto& tw = linear_taps<G::in_w, G::scale, G::align_corners>;
  for (std::size_t ow = 0; ow < G::out_w; ++ow) {
    const cohort::detail::LinearTap w = tw[ow];
    out[ow] = A(w.l0) * row[w.i0] + A(w.l1) * row[w.i1];
  }
}

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
    // Separable: each input row is widened once (w0 * a + w1 * b, torch's inner sum) into one of
    // two cached rows, and each output row is h0 * row(i0) + h1 * row(i1), a contiguous loop the
    // compiler vectorises. The expression per output is torch's, h0 * (..) + h1 * (..).
    constexpr auto& th = linear_taps<G::in_h, G::scale, G::align_corners>;
    A* rows = plane_scratch<A>(2 * G::out_w);
    std::size_t cached[2] = {G::in_h, G::in_h}; // slot = row parity: i1 is i0 or i0 + 1
    const auto widened = [&](std::size_t ih) -> const A* {
      A* r = rows + (ih & 1) * G::out_w;
      if (cached[ih & 1] != ih) {
        widen_row<G>(in + ih * G::in_w, r);
        cached[ih & 1] = ih;
      }
      return r;
    };
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      const A* __restrict t0 = widened(th[oh].i0);
      const A* __restrict t1 = widened(th[oh].i1);
      const A h0 = th[oh].l0, h1 = th[oh].l1;
      A* __restrict o = out + oh * G::out_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) o[ow] = h0 * t0[ow] + h1 * t1[ow];
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
    // The transpose of the separable forward: dy's rows are summed into in_h rows of out_w
    // (h-weighted, contiguous), and each of those is then spread over its input row (w-weighted).
    // Not torch's summation order (it adds h * w * dy per output); the sums differ by rounding only.
    constexpr auto& th = linear_taps<G::in_h, G::scale, G::align_corners>;
    constexpr auto& tw = linear_taps<G::in_w, G::scale, G::align_corners>;
    A* __restrict tall = plane_scratch<A>(G::in_h * G::out_w);
    std::fill(tall, tall + G::in_h * G::out_w, A(0));
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      A* __restrict t0 = tall + th[oh].i0 * G::out_w;
      A* __restrict t1 = tall + th[oh].i1 * G::out_w;
      const A h0 = th[oh].l0, h1 = th[oh].l1;
      const A* __restrict g = dy + oh * G::out_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) t0[ow] += h0 * g[ow];
      for (std::size_t ow = 0; ow < G::out_w; ++ow) t1[ow] += h1 * g[ow];
    }
    for (std::size_t ih = 0; ih < G::in_h; ++ih) {
      const A* t = tall + ih * G::out_w;
      A* r = dx + ih * G::in_w;
      for (std::size_t ow = 0; ow < G::out_w; ++ow) {
        const cohort::detail::LinearTap w = tw[ow];
        r[w.i0] += A(w.l0) * t[ow];
        r[w.i1] += A(w.l1) * t[ow];
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
