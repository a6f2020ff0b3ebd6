#pragma once
/// \file
/// Element-wise ops on the CPU: ReLU, dropout masks, copies.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/elementwise_apply.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/random.hpp"

namespace cohort {

template <>
struct ops::ElementwiseKernels<Cpu> {
  /// Elements per task: large enough that waking a thread pays off.
  static constexpr std::size_t grain = 16 * 1024;

  // The loops below capture pointers by value into __restrict locals: captured by reference,
  // every store could alias the pointer itself, and GCC would neither vectorise nor hoist loads.

  template <class T>
  static void copy(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    ctx.threads().parallel_for(n, grain, [x, y](std::size_t lo, std::size_t hi) { std::copy(x + lo, x + hi, y + lo); });
  }

  /// A block of channels of every sample, per sample one contiguous run (ChannelCopy).
  template <class T>
  static void copy_channels(CpuContext& ctx, const T* src, T* dst, const ChannelCopy& c) {
    const std::size_t run = c.channels * c.plane;
    ctx.threads().parallel_for(c.batch, grain / run + 1, [src, dst, c, run](std::size_t lo, std::size_t hi) {
      for (std::size_t n = lo; n < hi; ++n) {
        const T* from = src + (n * c.src_channels + c.src_first) * c.plane;
        std::copy(from, from + run, dst + (n * c.dst_channels + c.dst_first) * c.plane);
      }
    });
  }

  template <class T>
  static void relu_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    ctx.threads().parallel_for(n, grain, [x, y](std::size_t lo, std::size_t hi) {
      const T* __restrict in = x;
      T* __restrict out = y;
      for (std::size_t i = lo; i < hi; ++i) out[i] = accumulator_t<T>(in[i]) > 0 ? in[i] : T(0);
    });
  }
  /// dx = dy where y > 0 (PyTorch's threshold_backward on the output).
  template <class T>
  static void relu_backward(CpuContext& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    ctx.threads().parallel_for(n, grain, [y, dy, dx](std::size_t lo, std::size_t hi) {
      const T* __restrict out = y;
      const T* __restrict g = dy;
      T* __restrict d = dx;
      for (std::size_t i = lo; i < hi; ++i) d[i] = accumulator_t<T>(out[i]) > 0 ? g[i] : T(0);
    });
  }

  /// y = a + b, or max(a + b, 0) when `relu` (a residual block's sum, its ReLU fused). 16-bit
  /// elements are added in float and rounded once, as PyTorch adds half tensors.
  template <class T>
  static void add(CpuContext& ctx, const T* a, const T* b, T* y, std::size_t n, bool relu) {
    using A = accumulator_t<T>;
    ctx.threads().parallel_for(n, grain, [a, b, y, relu](std::size_t lo, std::size_t hi) {
      const T* __restrict p = a;
      const T* __restrict q = b;
      T* __restrict out = y;
      if (relu) // two loops: no branch inside either, so both vectorise
        for (std::size_t i = lo; i < hi; ++i) {
          const A s = A(p[i]) + A(q[i]);
          out[i] = T(s > 0 ? s : A(0));
        }
      else
        for (std::size_t i = lo; i < hi; ++i) out[i] = T(A(p[i]) + A(q[i]));
    });
  }

  /// For each unit u of `units` (an element, or a channel of `unit_size` elements): keep it when
  /// stream.uniform(index(u)) >= p, store the mask (0 or 1/(1-p)) and y = x * mask.
  /// The mask is kept in the accumulator type (1/(1-p) is not exact in 16 bits); 16-bit
  /// elements are multiplied in float.
  template <class T>
  static void dropout_forward(CpuContext& ctx, RandomStream stream, GlobalUnits index, float p, const T* x,
                              accumulator_t<T>* mask, T* y, std::size_t units, std::size_t unit_size) {
    using A = accumulator_t<T>;
    const A scale = A(1) / (A(1) - A(p));
    // Each unit's number depends only on its index, so any split gives the same masks.
    ctx.threads().parallel_for(units, grain / unit_size + 1, [=](std::size_t lo, std::size_t hi) {
      for (std::size_t u = lo; u < hi; ++u) {
        const A m = stream.uniform(index(u)) >= p ? scale : A(0);
        mask[u] = m;
        for (std::size_t j = 0; j < unit_size; ++j) y[u * unit_size + j] = T(A(x[u * unit_size + j]) * m);
      }
    });
  }

  /// Host <-> "device" copies: on the CPU both sides are host memory (engines written for any
  /// backend move data with these).
  template <class T>
  static void upload(CpuContext&, const T* host, T* device, std::size_t n) {
    std::copy(host, host + n, device);
  }
  template <class T>
  static void download(CpuContext&, const T* device, T* host, std::size_t n) {
    std::copy(device, device + n, host);
  }

  /// rule(p[i], g[i], state[i]...) for i in [0, n): an optimiser's element rule, vectorised for
  /// float (cpu::apply_elementwise), a plain loop for double.
  template <class Rule, class T, class... State>
  static void apply_rule(CpuContext& ctx, const Rule& rule, std::size_t n, T* p, const T* g, State*... state) {
    if constexpr (std::is_same_v<T, float>)
      cpu::apply_elementwise(ctx.threads(), rule, n, p, g, state...);
    else
      for (std::size_t i = 0; i < n; ++i) rule(p[i], g[i], state[i]...);
  }

  /// Sum of x[i]^2 in double: fixed blocks of `norm_block` elements, each summed in order, then
  /// the block sums in order, so the result does not depend on the thread count (gradient
  /// clipping must clip alike on every replica and rank).
  static constexpr std::size_t norm_block = 4096;
  template <class T>
  static double sum_of_squares(CpuContext& ctx, const T* x, std::size_t n) {
    const std::size_t blocks = (n + norm_block - 1) / norm_block;
    std::vector<double> partial(blocks, 0.0);
    ctx.threads().parallel_for(blocks, grain / norm_block, [x, n, p = partial.data()](std::size_t lo, std::size_t hi) {
      for (std::size_t b = lo; b < hi; ++b) {
        double s = 0;
        for (std::size_t i = b * norm_block, e = std::min(n, i + norm_block); i < e; ++i)
          s += double(x[i]) * double(x[i]);
        p[b] = s;
      }
    });
    double total = 0;
    for (const double s : partial) total += s;
    return total;
  }

  /// y[u, j] = x[u, j] * g[u]: a gate's value per (sample, channel) broadcast over its plane of
  /// `unit_size` elements (layers/gated.hpp), multiplied in the accumulator type, rounded once.
  template <class T>
  static void scale_units(CpuContext& ctx, const T* x, const T* g, T* y, std::size_t units, std::size_t unit_size) {
    using A = accumulator_t<T>;
    ctx.threads().parallel_for(units, grain / unit_size + 1, [=](std::size_t lo, std::size_t hi) {
      const T* __restrict in = x;
      T* __restrict out = y;
      for (std::size_t u = lo; u < hi; ++u) {
        const A s = A(g[u]);
        for (std::size_t j = 0; j < unit_size; ++j) out[u * unit_size + j] = T(A(in[u * unit_size + j]) * s);
      }
    });
  }
  /// scale_units' backward: dg[u] = sum_j dy[u, j] * x[u, j] (summed in order, in the
  /// accumulator type: the same for any thread count) and, unless dx is null, dx[u, j] = dy[u, j] * g[u].
  template <class T>
  static void scale_units_backward(CpuContext& ctx, const T* x, const T* g, const T* dy, T* dx, T* dg,
                                   std::size_t units, std::size_t unit_size) {
    using A = accumulator_t<T>;
    ctx.threads().parallel_for(units, grain / unit_size + 1, [=](std::size_t lo, std::size_t hi) {
      const T* __restrict in = x;
      const T* __restrict up = dy;
      T* __restrict down = dx;
      for (std::size_t u = lo; u < hi; ++u) {
        A sum = 0;
        for (std::size_t j = 0; j < unit_size; ++j) sum += A(up[u * unit_size + j]) * A(in[u * unit_size + j]);
        dg[u] = T(sum);
        if (down) {
          const A s = A(g[u]);
          for (std::size_t j = 0; j < unit_size; ++j) down[u * unit_size + j] = T(A(up[u * unit_size + j]) * s);
        }
      }
    });
  }

  /// y[u, j] = x[u, j] * mask[u]: a per-unit mask broadcast over `unit_size` elements.
  template <class T>
  static void multiply(CpuContext& ctx, const T* x, const accumulator_t<T>* mask, T* y, std::size_t units,
                       std::size_t unit_size) {
    using A = accumulator_t<T>;
    ctx.threads().parallel_for(units, grain / unit_size + 1, [=](std::size_t lo, std::size_t hi) {
      const T* __restrict in = x;
      const A* __restrict m = mask;
      T* __restrict out = y;
      for (std::size_t u = lo; u < hi; ++u)
        for (std::size_t j = 0; j < unit_size; ++j) out[u * unit_size + j] = T(A(in[u * unit_size + j]) * m[u]);
    });
  }
};

} // namespace cohort
