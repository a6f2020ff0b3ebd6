#pragma once
/// \file
/// Depthwise convolution on the CPU (layers/depthwise_conv2d.hpp): one K x K filter per channel,
/// forward, input gradient and weight/bias gradients.
///
///     ops::DepthwiseConv2dKernels<Cpu>::forward<Pool2dGeometry<C, H, W, K, S, P>>(ctx, x, w, b, y, batch);
///
/// A depthwise layer does K*K multiply-adds per output element against one input read, so it is
/// bound by memory, not by the FMA units. Stride 1 runs each (sample, channel) plane through a
/// zero-padded copy and contiguous per-tap loops over the whole plane (Wide below); strided
/// layers walk output rows. All in the accumulator type (float for float and the 16-bit types,
/// double for gradient checks).
/// Threads split the planes for the forward and input-gradient passes and the channels for the
/// weight gradient, so every sum has one fixed order whatever the thread count (bitwise
/// reproducible across thread counts).

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

namespace cpu::detail {
/// The output columns ow whose input column ow * S + kw - P lies in [0, W): [first, last).
template <class G>
constexpr std::size_t depthwise_first_column(std::size_t kw) {
  return kw >= G::padding ? 0 : (G::padding - kw + G::stride - 1) / G::stride;
}
template <class G>
constexpr std::size_t depthwise_last_column(std::size_t kw) {
  if (G::in_w + G::padding < kw + 1) return 0;
  return std::min<std::size_t>(G::out_w, (G::in_w - 1 + G::padding - kw) / G::stride + 1);
}
} // namespace cpu::detail

template <>
struct ops::DepthwiseConv2dKernels<Cpu> {
  /// Planes per task: a plane is small (H*W elements), so tasks take several.
  static constexpr std::size_t plane_grain = 4;

  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    if constexpr (G::stride == 1)
      wide_forward<G>(ctx, x, w, b, y, batch);
    else
      row_forward<G>(ctx, x, w, b, y, batch);
  }
  template <class G, class T>
  static void backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a) {
    if constexpr (G::stride == 1)
      wide_backward<G>(ctx, a);
    else
      row_backward<G>(ctx, a);
  }

 private:
  /// Stride 1: each plane is copied once into a zero-padded (H + 2P) x (W + 2P) buffer, and the
  /// output is computed over the "wide" plane (out_h rows of the padded width, the last K - 1
  /// columns of each row garbage): every tap is then one contiguous multiply-add loop of a
  /// compile-time length over the whole plane, which the compiler vectorises, instead of K * K
  /// short row loops with bounds (the small planes of 7x7 and 14x14 stages are all bounds).
  template <class G>
  struct Wide {
    static constexpr std::size_t K = G::kernel, P = G::padding;
    static constexpr std::size_t hp = G::in_h + 2 * P, wp = G::in_w + 2 * P;
    static constexpr std::size_t span = G::out_h * wp; // the wide output plane
    static constexpr std::size_t padded = hp * wp + K; // + K: the last taps read past the last row
  };
  /// The plane x (H x W) into the interior of the padded buffer (its border stays 0).
  template <class G, class T, class A>
  static void pad_plane(const T* x, A* xpad) {
    using Wd = Wide<G>;
    for (std::size_t h = 0; h < G::in_h; ++h)
      for (std::size_t w = 0; w < G::in_w; ++w) xpad[(h + Wd::P) * Wd::wp + w + Wd::P] = A(x[h * G::in_w + w]);
  }
  /// dy (out_h x out_w) into the wide layout, its garbage columns 0.
  template <class G, class T, class A>
  static void widen_plane(const T* dy, A* wide) {
    using Wd = Wide<G>;
    for (std::size_t oh = 0; oh < G::out_h; ++oh)
      for (std::size_t ow = 0; ow < Wd::wp; ++ow)
        wide[oh * Wd::wp + ow] = ow < G::out_w ? A(dy[oh * G::out_w + ow]) : A(0);
  }
  template <class G, class T>
  static void wide_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    using A = accumulator_t<T>;
    using Wd = Wide<G>;
    constexpr std::size_t K = G::kernel;
    ctx.threads().parallel_for(batch * G::channels, plane_grain, [=](std::size_t lo, std::size_t hi) {
      std::vector<A> xpad(Wd::padded, A(0)), out(Wd::span);
      for (std::size_t plane = lo; plane < hi; ++plane) {
        const std::size_t c = plane % G::channels;
        pad_plane<G>(x + plane * G::in_h * G::in_w, xpad.data());
        const T* wc = w + c * K * K;
        A* o = out.data();
        const A bias = b ? A(b[c]) : A(0);
        for (std::size_t i = 0; i < Wd::span; ++i) o[i] = bias;
        for (std::size_t kh = 0; kh < K; ++kh)
          for (std::size_t kw = 0; kw < K; ++kw) {
            const A wv = A(wc[kh * K + kw]);
            const A* src = xpad.data() + kh * Wd::wp + kw;
            for (std::size_t i = 0; i < Wd::span; ++i) o[i] += wv * src[i];
          }
        T* yp = y + plane * G::out_h * G::out_w;
        for (std::size_t oh = 0; oh < G::out_h; ++oh)
          for (std::size_t ow = 0; ow < G::out_w; ++ow) yp[oh * G::out_w + ow] = T(o[oh * Wd::wp + ow]);
      }
    });
  }

  template <class G, class T>
  static void wide_backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a) {
    using A = accumulator_t<T>;
    using Wd = Wide<G>;
    constexpr std::size_t K = G::kernel, P = G::padding;
    constexpr std::size_t in_plane = G::in_h * G::in_w, out_plane = G::out_h * G::out_w;
    const Conv2dBackwardArgs<T> args = a;
    // One channel per task, its samples in order: the wide dy is built once per plane and serves
    // both dx (scattered through every tap into a padded plane whose interior is dx) and the
    // weight gradient. That one is accumulated element-wise, per tap, over the wide plane and the
    // samples (contiguous multiply-adds that vectorise, where a dot product per tap and sample
    // would be a float reduction the compiler must not reorder), then each tap's plane summed once.
    ctx.threads().parallel_for(G::channels, 1, [=](std::size_t lo, std::size_t hi) {
      std::vector<A> dywide(Wd::span), xpad(Wd::padded, A(0)), dxpad(args.dx ? Wd::padded : 0);
      std::vector<A> taps(K * K * Wd::span);
      for (std::size_t c = lo; c < hi; ++c) {
        A dw[K * K] = {};
        A db = 0;
        const T* wc = args.w + c * K * K;
        std::fill(taps.begin(), taps.end(), A(0));
        for (std::size_t n = 0; n < args.batch; ++n) {
          const std::size_t plane = n * G::channels + c;
          widen_plane<G>(args.dy + plane * out_plane, dywide.data());
          pad_plane<G>(args.x + plane * in_plane, xpad.data());
          for (std::size_t kh = 0; kh < K; ++kh)
            for (std::size_t kw = 0; kw < K; ++kw) {
              A* acc = taps.data() + (kh * K + kw) * Wd::span;
              const A* g = dywide.data();
              const A* src = xpad.data() + kh * Wd::wp + kw;
              for (std::size_t i = 0; i < Wd::span; ++i) acc[i] += g[i] * src[i];
            }
          if (args.db) { // the wide dy holds this plane's dy in order, 0 in the garbage columns
            A sum = 0;
            for (std::size_t i = 0; i < Wd::span; ++i) sum += dywide[i];
            db += sum;
          }
          if (!args.dx) continue;
          std::fill(dxpad.begin(), dxpad.end(), A(0));
          for (std::size_t kh = 0; kh < K; ++kh)
            for (std::size_t kw = 0; kw < K; ++kw) {
              const A wv = A(wc[kh * K + kw]);
              A* dst = dxpad.data() + kh * Wd::wp + kw;
              const A* g = dywide.data();
              for (std::size_t i = 0; i < Wd::span; ++i) dst[i] += wv * g[i];
            }
          T* dxp = args.dx + plane * in_plane;
          for (std::size_t h = 0; h < G::in_h; ++h)
            for (std::size_t w = 0; w < G::in_w; ++w) dxp[h * G::in_w + w] = T(dxpad[(h + P) * Wd::wp + w + P]);
        }
        for (std::size_t t = 0; t < K * K; ++t)
          for (std::size_t i = 0; i < Wd::span; ++i) dw[t] += taps[t * Wd::span + i];
        accumulator_t<T>* out = args.dw + c * K * K;
        for (std::size_t i = 0; i < K * K; ++i) out[i] = args.accumulate ? out[i] + dw[i] : dw[i];
        if (args.db) args.db[c] = args.accumulate ? args.db[c] + db : db;
      }
    });
  }

  /// Strided layers: row loops over each output row, the input columns in bounds for each tap.
  template <class G, class T>
  static void row_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    using A = accumulator_t<T>;
    constexpr std::size_t K = G::kernel, S = G::stride, P = G::padding;
    ctx.threads().parallel_for(batch * G::channels, plane_grain, [=](std::size_t lo, std::size_t hi) {
      std::vector<A> row(G::out_w);
      for (std::size_t plane = lo; plane < hi; ++plane) {
        const std::size_t c = plane % G::channels;
        const T* xp = x + plane * G::in_h * G::in_w;
        T* yp = y + plane * G::out_h * G::out_w;
        const T* wc = w + c * K * K;
        for (std::size_t oh = 0; oh < G::out_h; ++oh) {
          std::fill(row.begin(), row.end(), b ? A(b[c]) : A(0));
          for (std::size_t kh = 0; kh < K; ++kh) {
            if (oh * S + kh < P || oh * S + kh - P >= G::in_h) continue;
            const T* xr = xp + (oh * S + kh - P) * G::in_w;
            for (std::size_t kw = 0; kw < K; ++kw) {
              const A wv = A(wc[kh * K + kw]);
              const std::size_t first = cpu::detail::depthwise_first_column<G>(kw);
              const std::size_t last = cpu::detail::depthwise_last_column<G>(kw);
              for (std::size_t ow = first; ow < last; ++ow) row[ow] += wv * A(xr[ow * S + kw - P]);
            }
          }
          for (std::size_t ow = 0; ow < G::out_w; ++ow) yp[oh * G::out_w + ow] = T(row[ow]);
        }
      }
    });
  }

  template <class G, class T>
  static void row_backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a) {
    using A = accumulator_t<T>;
    constexpr std::size_t K = G::kernel, S = G::stride, P = G::padding;
    constexpr std::size_t in_plane = G::in_h * G::in_w, out_plane = G::out_h * G::out_w;
    const Conv2dBackwardArgs<T> args = a;
    if (args.dx)
      ctx.threads().parallel_for(args.batch * G::channels, plane_grain, [=](std::size_t lo, std::size_t hi) {
        std::vector<A> dxp(in_plane);
        for (std::size_t plane = lo; plane < hi; ++plane) {
          const std::size_t c = plane % G::channels;
          const T* dyp = args.dy + plane * out_plane;
          const T* wc = args.w + c * K * K;
          std::fill(dxp.begin(), dxp.end(), A(0));
          for (std::size_t oh = 0; oh < G::out_h; ++oh)
            for (std::size_t kh = 0; kh < K; ++kh) {
              if (oh * S + kh < P || oh * S + kh - P >= G::in_h) continue;
              A* dxr = dxp.data() + (oh * S + kh - P) * G::in_w;
              for (std::size_t kw = 0; kw < K; ++kw) {
                const A wv = A(wc[kh * K + kw]);
                const std::size_t first = cpu::detail::depthwise_first_column<G>(kw);
                const std::size_t last = cpu::detail::depthwise_last_column<G>(kw);
                for (std::size_t ow = first; ow < last; ++ow) dxr[ow * S + kw - P] += wv * A(dyp[oh * G::out_w + ow]);
              }
            }
          T* out = args.dx + plane * in_plane;
          for (std::size_t i = 0; i < in_plane; ++i) out[i] = T(dxp[i]);
        }
      });
    // Weight and bias gradients: one channel per task, summed over the batch in sample order.
    ctx.threads().parallel_for(G::channels, 1, [=](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        A dw[K * K] = {};
        A db = 0;
        for (std::size_t n = 0; n < args.batch; ++n) {
          const std::size_t plane = n * G::channels + c;
          const T* xp = args.x + plane * in_plane;
          const T* dyp = args.dy + plane * out_plane;
          for (std::size_t oh = 0; oh < G::out_h; ++oh) {
            const T* dyr = dyp + oh * G::out_w;
            if (args.db)
              for (std::size_t ow = 0; ow < G::out_w; ++ow) db += A(dyr[ow]);
            for (std::size_t kh = 0; kh < K; ++kh) {
              if (oh * S + kh < P || oh * S + kh - P >= G::in_h) continue;
              const T* xr = xp + (oh * S + kh - P) * G::in_w;
              for (std::size_t kw = 0; kw < K; ++kw) {
                const std::size_t first = cpu::detail::depthwise_first_column<G>(kw);
                const std::size_t last = cpu::detail::depthwise_last_column<G>(kw);
                A sum = 0;
                for (std::size_t ow = first; ow < last; ++ow) sum += A(dyr[ow]) * A(xr[ow * S + kw - P]);
                dw[kh * K + kw] += sum;
              }
            }
          }
        }
        accumulator_t<T>* out = args.dw + c * K * K;
        for (std::size_t i = 0; i < K * K; ++i) out[i] = args.accumulate ? out[i] + dw[i] : dw[i];
        if (args.db) args.db[c] = args.accumulate ? args.db[c] + db : db;
      }
    });
  }
};

} // namespace cohort
