#pragma once
/// \file
/// Depthwise convolution on the CPU (layers/depthwise_conv2d.hpp): one K x K filter per channel,
/// forward, input gradient and weight/bias gradients.
///
///     ops::DepthwiseConv2dKernels<Cpu>::forward<Pool2dGeometry<C, H, W, K, S, P>>(ctx, x, w, b, y, batch);
///
/// A depthwise layer does K*K multiply-adds per output element against one input read, so it is
/// bound by memory, not by the FMA units. Each (sample, channel) plane is copied once into a
/// zero-padded buffer split into S x S phases (Phases below; one phase at stride 1), and the
/// output is computed over a "wide" plane: every tap is then one contiguous multiply-add loop of
/// a compile-time length, which the compiler vectorises, instead of K * K short row loops with
/// bounds (the small planes of 7x7 and 14x14 stages are all bounds; strided rows do not vectorise
/// at all). All in the accumulator type (float for float and the 16-bit types, double for
/// gradient checks).
/// Threads split the planes for the forward pass and the channels for the backward pass (input
/// and weight gradients together), so every sum has one fixed order whatever the thread count
/// (bitwise reproducible across thread counts).

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

template <>
struct ops::DepthwiseConv2dKernels<Cpu> {
  /// Planes per task: a plane is small (H*W elements), so tasks take several.
  static constexpr std::size_t plane_grain = 4;

  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    using A = accumulator_t<T>;
    using Ph = Phases<G>;
    constexpr std::size_t K = G::kernel;
    ctx.threads().parallel_for(batch * G::channels, plane_grain, [=](std::size_t lo, std::size_t hi) {
      std::vector<A> xph(Ph::size, A(0)), out(Ph::span);
      for (std::size_t plane = lo; plane < hi; ++plane) {
        const std::size_t c = plane % G::channels;
        split_plane<G>(x + plane * G::in_h * G::in_w, xph.data());
        const T* wc = w + c * K * K;
        A* o = out.data();
        const A bias = b ? A(b[c]) : A(0);
        for (std::size_t i = 0; i < Ph::span; ++i) o[i] = bias;
        for (std::size_t kh = 0; kh < K; ++kh)
          for (std::size_t kw = 0; kw < K; ++kw) {
            const A wv = A(wc[kh * K + kw]);
            const A* src = xph.data() + Ph::tap(kh, kw);
            for (std::size_t i = 0; i < Ph::span; ++i) o[i] += wv * src[i];
          }
        T* yp = y + plane * G::out_h * G::out_w;
        for (std::size_t oh = 0; oh < G::out_h; ++oh)
          for (std::size_t ow = 0; ow < G::out_w; ++ow) yp[oh * G::out_w + ow] = T(o[oh * Ph::row + ow]);
      }
    });
  }

  template <class G, class T>
  static void backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a) {
    using A = accumulator_t<T>;
    using Ph = Phases<G>;
    constexpr std::size_t K = G::kernel;
    constexpr std::size_t in_plane = G::in_h * G::in_w, out_plane = G::out_h * G::out_w;
    const Conv2dBackwardArgs<T> args = a;
    // One channel per task, its samples in order: the wide dy is built once per plane and serves
    // both dx (scattered through every tap into phase planes whose interior is dx) and the
    // weight gradient. That one is accumulated element-wise, per tap, over the wide plane and the
    // samples (contiguous multiply-adds that vectorise, where a dot product per tap and sample
    // would be a float reduction the compiler must not reorder), then each tap's plane summed once.
    ctx.threads().parallel_for(G::channels, 1, [=](std::size_t lo, std::size_t hi) {
      std::vector<A> dywide(Ph::span), xph(Ph::size, A(0)), dxph(args.dx ? Ph::size : 0);
      std::vector<A> taps(K * K * Ph::span);
      for (std::size_t c = lo; c < hi; ++c) {
        A dw[K * K] = {};
        A db = 0;
        const T* wc = args.w + c * K * K;
        std::fill(taps.begin(), taps.end(), A(0));
        for (std::size_t n = 0; n < args.batch; ++n) {
          const std::size_t plane = n * G::channels + c;
          widen_plane<G>(args.dy + plane * out_plane, dywide.data());
          split_plane<G>(args.x + plane * in_plane, xph.data());
          for (std::size_t kh = 0; kh < K; ++kh)
            for (std::size_t kw = 0; kw < K; ++kw) {
              A* acc = taps.data() + (kh * K + kw) * Ph::span;
              const A* g = dywide.data();
              const A* src = xph.data() + Ph::tap(kh, kw);
              for (std::size_t i = 0; i < Ph::span; ++i) acc[i] += g[i] * src[i];
            }
          if (args.db) { // the wide dy holds this plane's dy in order, 0 in the garbage columns
            A sum = 0;
            for (std::size_t i = 0; i < Ph::span; ++i) sum += dywide[i];
            db += sum;
          }
          if (!args.dx) continue;
          std::fill(dxph.begin(), dxph.end(), A(0));
          for (std::size_t kh = 0; kh < K; ++kh)
            for (std::size_t kw = 0; kw < K; ++kw) {
              const A wv = A(wc[kh * K + kw]);
              A* dst = dxph.data() + Ph::tap(kh, kw);
              const A* g = dywide.data();
              for (std::size_t i = 0; i < Ph::span; ++i) dst[i] += wv * g[i];
            }
          merge_plane<G>(dxph.data(), args.dx + plane * in_plane);
        }
        for (std::size_t t = 0; t < K * K; ++t)
          for (std::size_t i = 0; i < Ph::span; ++i) dw[t] += taps[t * Ph::span + i];
        accumulator_t<T>* out = args.dw + c * K * K;
        for (std::size_t i = 0; i < K * K; ++i) out[i] = args.accumulate ? out[i] + dw[i] : dw[i];
        if (args.db) args.db[c] = args.accumulate ? args.db[c] + db : db;
      }
    });
  }

 private:
  /// The zero-padded (H + 2P) x (W + 2P) plane split into S x S phases: phase (a, b) holds the
  /// padded elements (S*i + a, S*j + b) at (i, j) of a ph_h x row plane. Output (oh, ow) of tap
  /// (kh, kw) reads padded (oh*S + kh, ow*S + kw), which is (oh + kh/S, ow + kw/S) of phase
  /// (kh%S, kw%S): over the wide output plane (out_h rows of `row` columns, the columns past
  /// out_w garbage) every tap is one contiguous loop from tap(kh, kw). At stride 1 this is the
  /// padded plane itself.
  template <class G>
  struct Phases {
    static constexpr std::size_t K = G::kernel, S = G::stride, P = G::padding;
    static constexpr std::size_t hp = G::in_h + 2 * P, wp = G::in_w + 2 * P;
    static constexpr std::size_t ph_h = (hp + S - 1) / S, row = (wp + S - 1) / S;
    static constexpr std::size_t phase = ph_h * row + K; // + K: the last taps read past the last row
    static constexpr std::size_t size = S * S * phase;
    static constexpr std::size_t span = G::out_h * row; // the wide output plane
    static constexpr std::size_t tap(std::size_t kh, std::size_t kw) {
      return ((kh % S) * S + kw % S) * phase + (kh / S) * row + kw / S;
    }
    // The widest read, tap (K-1, K-1) at the last wide element, stays inside its phase.
    static_assert(G::out_h - 1 + (K - 1) / S < ph_h && G::out_w - 1 + (K - 1) / S < row);
    static_assert((K - 1) / S * row + (K - 1) / S + span <= phase);
  };
  /// Calls f(phase row, x offset, count) for the runs of one input row h: the elements of row h
  /// whose padded columns fall in column phase b, contiguous in the phase (j = j0, j0 + 1, ...)
  /// and S apart in x (x column S * j + b - P).
  template <class G, class F>
  static void for_each_run(std::size_t h, F&& f) {
    using Ph = Phases<G>;
    constexpr std::size_t S = Ph::S, P = Ph::P;
    const std::size_t hh = h + P;
    for (std::size_t b = 0; b < S; ++b) {
      const std::size_t j0 = P > b ? (P - b + S - 1) / S : 0; // the first j with S*j + b >= P
      const std::size_t first = S * j0 + b - P;               // its x column
      if (first >= G::in_w) continue;
      const std::size_t count = (G::in_w - 1 - first) / S + 1;
      f(((hh % S) * S + b) * Ph::phase + (hh / S) * Ph::row + j0, h * G::in_w + first, count);
    }
  }
  /// The plane x (H x W) into the phases' interior (their padding stays 0).
  template <class G, class T, class A>
  static void split_plane(const T* x, A* xph) {
    constexpr std::size_t S = G::stride;
    for (std::size_t h = 0; h < G::in_h; ++h)
      for_each_run<G>(h, [&](std::size_t to, std::size_t from, std::size_t count) {
        for (std::size_t j = 0; j < count; ++j) xph[to + j] = A(x[from + S * j]);
      });
  }
  /// The phases' interior back into the plane dx (H x W).
  template <class G, class T, class A>
  static void merge_plane(const A* dxph, T* dx) {
    constexpr std::size_t S = G::stride;
    for (std::size_t h = 0; h < G::in_h; ++h)
      for_each_run<G>(h, [&](std::size_t from, std::size_t to, std::size_t count) {
        for (std::size_t j = 0; j < count; ++j) dx[to + S * j] = T(dxph[from + j]);
      });
  }
  /// dy (out_h x out_w) into the wide layout, its garbage columns 0.
  template <class G, class T, class A>
  static void widen_plane(const T* dy, A* wide) {
    using Ph = Phases<G>;
    for (std::size_t oh = 0; oh < G::out_h; ++oh)
      for (std::size_t ow = 0; ow < Ph::row; ++ow)
        wide[oh * Ph::row + ow] = ow < G::out_w ? A(dy[oh * G::out_w + ow]) : A(0);
  }
};

} // namespace cohort
