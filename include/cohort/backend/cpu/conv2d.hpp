#pragma once
/// \file
/// Conv2d on the CPU: im2col + GEMM per sample.
///
/// The forward pass writes the bias into the output first and lets the GEMM accumulate onto it;
/// the backward pass recomputes the im2col matrix instead of keeping one per sample (which
/// would cost batch x patch x plane floats of memory).

#include <algorithm>
#include <cstddef>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {
namespace cpu {

/// Output positions [first, last) whose window tap `k` lands inside an input extent `in` (the
/// rest fall on padding). Computing the range up front keeps the copy loops branch-free; it
/// also sidesteps a GCC 12 -O3 loop-unswitching miscompilation of the per-element test.
struct TapRange {
  std::size_t first, last;
};
constexpr TapRange tap_range(std::size_t k, std::size_t in, std::size_t out, std::size_t stride,
                             std::size_t pad) noexcept {
  const std::size_t first = k >= pad ? 0 : (pad - k + stride - 1) / stride;
  const std::size_t last = in + pad > k ? std::min(out, (in + pad - k - 1) / stride + 1) : 0;
  return {std::min(first, last), last};
}

/// col (patch, out_plane) from one (C, H, W) sample; zero where the window hangs over the padding.
template <class G, class T>
void im2col(const T* x, T* col) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        std::fill(row, row + rows.first * G::out_w, T(0));
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          const T* in = x + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          T* out = row + oh * G::out_w;
          std::fill(out, out + cols.first, T(0));
          if constexpr (G::stride == 1)
            std::copy(in + cols.first, in + cols.last, out + cols.first);
          else
            for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow] = in[ow * G::stride];
          std::fill(out + cols.last, out + G::out_w, T(0));
        }
        std::fill(row + rows.last * G::out_w, row + G::out_plane, T(0));
      }
    }
}

/// dx += scatter of col (patch, out_plane) back onto one (C, H, W) sample.
template <class G, class T>
void col2im_add(const T* col, T* dx) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        const T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          T* out = dx + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          const T* in = row + oh * G::out_w;
          for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow * G::stride] += in[ow];
        }
      }
    }
}

} // namespace cpu

namespace cpu::detail {
/// Per-thread scratch for im2col matrices: grows to the largest layer, then never allocates.
template <class T>
HostBuffer<T>& conv_scratch(std::size_t n) {
  thread_local HostBuffer<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer;
}
} // namespace cpu::detail

template <>
struct ops::Conv2dKernels<Cpu> {
  template <class G, class T>
  struct workspace {
    void reserve(std::size_t) noexcept {}
  };

  /// Samples are independent: split them between threads.
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>&) {
    ctx.threads().parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      T* col = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      for (std::size_t n = lo; n < hi; ++n) {
        T* yn = y + n * G::out_size;
        for (std::size_t o = 0; o < G::out_channels; ++o)
          std::fill(yn + o * G::out_plane, yn + (o + 1) * G::out_plane, b[o]);
        cpu::im2col<G>(x + n * G::in_size, col);
        cpu::gemm(false, false, G::out_channels, G::out_plane, G::patch, T(1), w, G::patch, col, G::out_plane, T(1), yn,
                  G::out_plane);
      }
    });
  }

  /// dW and db sum over samples, so they are split by output channel (each thread sums all
  /// samples for its channels, in sample order: the same result for any thread count); dX is
  /// split by sample.
  template <class G, class T>
  static void backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::size_t batch,
                       bool accumulate, workspace<G, T>&) {
    ThreadPool& pool = ctx.threads();
    const std::size_t per_thread = (G::out_channels + pool.size() - 1) / pool.size();
    pool.parallel_for(G::out_channels, per_thread, [&](std::size_t o0, std::size_t o1) {
      T* col = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      if (!accumulate) {
        std::fill(dw + o0 * G::patch, dw + o1 * G::patch, T(0));
        std::fill(db + o0, db + o1, T(0));
      }
      for (std::size_t n = 0; n < batch; ++n) {
        const T* dyn = dy + n * G::out_size;
        for (std::size_t o = o0; o < o1; ++o) {
          T s = 0;
          for (std::size_t p = 0; p < G::out_plane; ++p) s += dyn[o * G::out_plane + p];
          db[o] += s;
        }
        cpu::im2col<G>(x + n * G::in_size, col);
        // dW (out, patch) += dY_n (out, plane) * col^T (plane, patch), rows o0..o1
        cpu::gemm(false, true, o1 - o0, G::patch, G::out_plane, T(1), dyn + o0 * G::out_plane, G::out_plane, col,
                  G::out_plane, T(1), dw + o0 * G::patch, G::patch);
      }
    });
    if (!dx) return;
    pool.parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      T* dcol = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      for (std::size_t n = lo; n < hi; ++n) {
        // dcol (patch, plane) = W^T (patch, out) * dY_n (out, plane), then scattered onto dx
        cpu::gemm(true, false, G::patch, G::out_plane, G::out_channels, T(1), w, G::patch, dy + n * G::out_size,
                  G::out_plane, T(0), dcol, G::out_plane);
        T* dxn = dx + n * G::in_size;
        std::fill(dxn, dxn + G::in_size, T(0));
        cpu::col2im_add<G>(dcol, dxn);
      }
    });
  }
};

} // namespace cohort
