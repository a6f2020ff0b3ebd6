#pragma once
/// \file
/// Conv2d on the CPU: im2col + GEMM per sample.
///
/// The forward pass writes the bias into the output first and lets the GEMM accumulate onto it;
/// the backward pass recomputes the im2col matrix instead of keeping one per sample (which
/// would cost batch x patch x plane floats of memory).

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d_direct.hpp"
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
/// Batch-sized buffers of the calling thread, one per slot, shared by every layer's backward
/// pass: they grow to the largest layer's need, then never allocate.
inline float* transient(int slot, std::size_t n) {
  thread_local HostBuffer<float> buffers[3];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

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
  /// What a layer keeps between calls: its packed weights. Batch-sized buffers (padded inputs,
  /// transposed dY) are per-thread transients shared by every layer, so memory grows with the
  /// largest layer, not with the sum of them.
  template <class G, class T>
  struct workspace {
    HostBuffer<float> packed, packed_t; // weights for forward and for dX
    void reserve(std::size_t) noexcept {}
  };

  /// The direct path runs stride-1 float convolutions; the im2col path everything else.
  template <class G, class T>
  static constexpr bool use_direct = std::is_same_v<T, float>&& cpu::direct::applicable<G>;
  /// A following ReLU can be applied inside the kernels (the executor then skips it).
  template <class G, class T>
  static constexpr bool fuses_relu = use_direct<G, T>;

  /// `relu`: write max(output, 0) (only when fuses_relu).
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>& ws,
                      bool relu = false) {
    if constexpr (use_direct<G, T>)
      direct_forward<G>(ctx, x, w, b, y, batch, ws, relu);
    else
      im2col_forward<G>(ctx, x, w, b, y, batch);
  }

  /// `relu_y`: the output of a fused ReLU (dy is then that ReLU's output gradient).
  template <class G, class T>
  static void backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::size_t batch,
                       bool accumulate, workspace<G, T>& ws, const T* relu_y = nullptr) {
    if constexpr (use_direct<G, T>)
      direct_backward<G>(ctx, x, w, dy, dx, dw, db, batch, accumulate, ws, relu_y);
    else
      im2col_backward<G>(ctx, x, w, dy, dx, dw, db, batch, accumulate);
  }

 private:
  // ---- direct path: stride 1, float ------------------------------------------------------------

  template <class G>
  static void direct_forward(CpuContext& ctx, const float* x, const float* w, const float* b, float* y,
                             std::size_t batch, workspace<G, float>& ws, bool relu) {
    using V = cpu::direct::Wide<G>;
    const Isa isa = cpu::active_isa();
    const std::size_t rows = cpu::direct::forward_rows<G>(isa);
    cpu::direct::pack_for<G, G>(isa, w, ws.packed, false);
    run_groups<G>(
        ctx, isa, batch, rows, ws.packed.data(), b,
        [&](std::size_t n, float* xt) { cpu::direct::pad_sample<G>(x + n * G::in_size, xt); },
        [&](std::size_t n, const float* wide) { cpu::direct::unwiden<G>(wide, y + n * G::out_size, V::cout, relu); });
  }

  /// Runs the direct forward kernel of Gk over `batch` samples in groups of forward_group<Gk>,
  /// the groups split between threads: `pad(n, xt)` fills sample n's padded planes, `unpad(n,
  /// wide)` takes its wide output. Scratch is per thread.
  template <class Gk, class Pad, class Unpad>
  static void run_groups(CpuContext& ctx, Isa isa, std::size_t batch, std::size_t rows, const float* packed,
                         const float* bias, Pad&& pad, Unpad&& unpad) {
    using V = cpu::direct::Wide<Gk>;
    // Smaller groups when there are too few samples to give every thread one.
    const std::size_t threads = ctx.threads().size();
    const std::size_t group =
        std::min(cpu::direct::forward_group<Gk>, std::max<std::size_t>(1, (batch + threads - 1) / threads));
    const std::size_t groups = (batch + group - 1) / group;
    ctx.threads().parallel_for(groups, 1, [&, isa, rows, group](std::size_t lo, std::size_t hi) {
      const std::size_t out_stride = rows * V::positions, in_stride = V::cin * V::plane;
      float* wide = cpu::detail::conv_scratch<float>(group * (out_stride + in_stride)).data();
      float* xt = wide + group * out_stride;
      for (std::size_t g = lo; g < hi; ++g) {
        const std::size_t n0 = g * group, count = std::min(group, batch - n0);
        for (std::size_t i = 0; i < count; ++i) pad(n0 + i, xt + i * in_stride);
        cpu::direct::forward_samples_dispatch<Gk>(isa, xt, count, packed, bias, wide);
        for (std::size_t i = 0; i < count; ++i) unpad(n0 + i, wide + i * out_stride);
      }
    });
  }

  template <class G>
  static void direct_backward(CpuContext& ctx, const float* x, const float* w, const float* dy, float* dx, float* dw,
                              float* db, std::size_t batch, bool accumulate, workspace<G, float>& ws,
                              const float* relu_y) {
    using V = cpu::direct::Wide<G>;
    const Isa isa = cpu::active_isa();
    ThreadPool& pool = ctx.threads();
    const auto shape = cpu::direct::weight_grad_shape<G>(isa);
    constexpr std::size_t valid = G::out_h * G::out_w, patch = V::cin * V::taps;
    // Transients of the calling thread (the pool's threads only see them through pointers).
    float* padded = cpu::detail::transient(0, batch * V::cin * V::plane);
    float* dyt = cpu::detail::transient(1, batch * valid * shape.padded_cout);
    float* dw_t = cpu::detail::transient(2, patch * shape.padded_cout);
    // The padded input (rebuilt: cheaper in memory than keeping it from the forward pass) and dY
    // transposed to (sample, position, channel): the dW kernel vectorises over channels.
    pool.parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t n = lo; n < hi; ++n) {
        cpu::direct::pad_sample<G>(x + n * G::in_size, padded + n * V::cin * V::plane);
        cpu::direct::transpose_dy<G>(dy + n * G::out_size, dyt + n * valid * shape.padded_cout, shape.padded_cout,
                                     relu_y ? relu_y + n * G::out_size : nullptr);
      }
    });
    // Bias: one vector lane per channel, samples and positions in order.
    cpu::direct::bias_grad(isa, dyt, batch * valid, shape.padded_cout, V::cout, db, accumulate);
    // dW^T by (input channel, kernel rows) x output-channel tiles over blocks of samples, in
    // order. A block has enough positions (>= 384) that a tile's accumulators, loaded and stored
    // once per block, cost little; consecutive tiles share one slice of dY, hot in cache.
    const std::size_t block = std::min(batch, std::max<std::size_t>(1, (384 + valid - 1) / valid));
    pool.parallel_for(shape.tiles, 1, [&, isa](std::size_t lo, std::size_t hi) {
      for (std::size_t n0 = 0; n0 < batch; n0 += block)
        for (std::size_t t = lo; t < hi; ++t)
          cpu::direct::weight_grad_tile_dispatch<G>(isa, padded + n0 * V::cin * V::plane,
                                                    dyt + n0 * valid * shape.padded_cout, std::min(block, batch - n0),
                                                    t, dw_t, n0 == 0);
    });
    for (std::size_t o = 0; o < V::cout; ++o)
      for (std::size_t k = 0; k < patch; ++k)
        dw[o * patch + k] =
            accumulate ? dw[o * patch + k] + dw_t[k * shape.padded_cout + o] : dw_t[k * shape.padded_cout + o];
    if (!dx) return;
    // dX: the "full" convolution of dY with the rotated, transposed kernel.
    using Gt = cpu::direct::transposed_geometry<G>;
    using Vt = cpu::direct::Wide<Gt>;
    const std::size_t rows = cpu::direct::forward_rows<Gt>(isa);
    cpu::direct::pack_for<G, Gt>(isa, w, ws.packed_t, true);
    run_groups<Gt>(
        ctx, isa, batch, rows, ws.packed_t.data(), nullptr,
        [&](std::size_t n, float* padded_dy) {
          cpu::direct::pad_sample<Gt>(dy + n * G::out_size, padded_dy, relu_y ? relu_y + n * G::out_size : nullptr);
        },
        [&](std::size_t n, const float* wide) { cpu::direct::unwiden<Gt>(wide, dx + n * G::in_size, Vt::cout); });
  }

  // ---- im2col path: any stride, any T -----------------------------------------------------------

  /// Samples are independent: split them between threads.
  template <class G, class T>
  static void im2col_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
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
  static void im2col_backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                              std::size_t batch, bool accumulate) {
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
