#pragma once
/// \file
/// Pooling on the CPU: MaxPool2d (saving the argmax of every window for the backward pass),
/// AvgPool2d and global average pooling (AdaptiveAvgPool2d<1>).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/tap_range.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort {

namespace cpu::detail {
/// PyTorch's max-pool update: a later element wins when it is larger, or NaN while the best so
/// far is not (the first NaN stays). Written without short-circuits so loops if-convert.
template <class T>
inline bool takes_max(T v, T best) noexcept {
  return (v > best) | ((v != v) & (best == best));
}
/// Per-thread scratch of the 2x2 pooling path.
inline float* pool_scratch(std::size_t n) {
  thread_local HostBuffer<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

/// value[i], right[i] = the larger of in[2i], in[2i+1] (first wins ties), vectorised.
template <int W>
COHORT_ALWAYS_INLINE void horizontal_pairs_impl(const float* __restrict in, float* __restrict value,
                                                std::int32_t* __restrict right, std::size_t pairs) {
  using iv = ivec<W>;
  iv even{}, odd{};
  for (int l = 0; l < W; ++l) even[l] = 2 * l, odd[l] = 2 * l + 1;
  const std::size_t whole = pairs / W * W;
  for (std::size_t i = 0; i < whole; i += W) {
    const vec<W> a = load<W>(in + 2 * i), b = load<W>(in + 2 * i + W);
    const vec<W> l = __builtin_shuffle(a, b, even), r = __builtin_shuffle(a, b, odd);
    const iv take = (r > l) | ((r != r) & (l == l));
    store<W>(value + i, take ? r : l);
    const iv bit = take & 1;
    __builtin_memcpy(right + i, &bit, sizeof bit);
  }
  for (std::size_t i = whole; i < pairs; ++i) {
    const bool take = takes_max(in[2 * i + 1], in[2 * i]);
    value[i] = take ? in[2 * i + 1] : in[2 * i];
    right[i] = take;
  }
}
COHORT_TARGET_AVX512 inline void horizontal_pairs_avx512(const float* in, float* v, std::int32_t* r, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx512);
  horizontal_pairs_impl<16>(in, v, r, n);
}
COHORT_TARGET_AVX2 inline void horizontal_pairs_avx2(const float* in, float* v, std::int32_t* r, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx2);
  horizontal_pairs_impl<8>(in, v, r, n);
}
inline void horizontal_pairs(Isa isa, const float* in, float* v, std::int32_t* r, std::size_t n) {
  if (isa == Isa::avx512)
    horizontal_pairs_avx512(in, v, r, n);
  else if (isa == Isa::avx2)
    horizontal_pairs_avx2(in, v, r, n);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    horizontal_pairs_impl<4>(in, v, r, n);
  }
}
} // namespace cpu::detail

template <>
struct ops::PoolKernels<Cpu> {
  template <class G, class T>
  struct workspace {
    HostBuffer<std::uint32_t> argmax; // (batch, C, out_h, out_w): index into the input plane
    void reserve(std::size_t batch) { argmax.resize(batch * G::out_size); }
  };

  template <class G, class T>
  static void max_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch, workspace<G, T>& ws);

  template <class G, class T>
  static void max_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch, workspace<G, T>& ws);

  /// AvgPool2d (count_include_pad, floor mode): each window's sum divided by K*K. Planes are
  /// split between threads; 16-bit planes are averaged in float and rounded once.
  template <class G, class T>
  static void avg_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch);
  /// dx = the sum of dy / (K*K) over the windows that cover each element (0 for elements no
  /// window covers), added in the windows' row-major order as PyTorch's CPU kernel adds them.
  template <class G, class T>
  static void avg_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch);

  /// Global average pooling (G: a ChannelGeometry): y[n, c] = the mean of plane (n, c), summed
  /// in double (eight interleaved partial sums, added in a fixed order) and divided once.
  template <class G, class T>
  static void global_avg_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch);
  /// dx[n, c, :] = dy[n, c] / (H*W).
  template <class G, class T>
  static void global_avg_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch);

 private:
  /// fn(in, out) on every plane pair (src: InPlane values per plane, dst: OutPlane), planes split
  /// between threads; 16-bit planes go through float scratch and are rounded once on the way out.
  template <std::size_t InPlane, std::size_t OutPlane, class T, class Fn>
  static void each_plane_in_float(CpuContext& ctx, const T* src, T* dst, std::size_t planes, Fn fn) {
    const Isa isa = cpu::active_isa();
    ctx.threads().parallel_for(planes, 16, [src, dst, isa, fn](std::size_t p0, std::size_t p1) {
      for (std::size_t plane = p0; plane < p1; ++plane) {
        if constexpr (std::is_same_v<T, accumulator_t<T>>) {
          fn(src + plane * InPlane, dst + plane * OutPlane);
        } else {
          float* in = cpu::convert_scratch(0, InPlane);
          float* out = cpu::convert_scratch(1, OutPlane);
          cpu::load_floats(isa, src + plane * InPlane, in, InPlane);
          fn(in, out);
          cpu::store_floats(isa, out, dst + plane * OutPlane, OutPlane);
        }
      }
    });
  }

  /// One plane of AvgPool2d, output row by output row: the row's window sums are built tap by
  /// tap (each tap a branch-free strided run of the input row, vectorisable), so every output
  /// adds its window in row-major order, as PyTorch's kernel does, then divides by K*K.
  template <class G, class A>
  static void avg_plane(const A* __restrict in, A* __restrict out) {
    constexpr std::size_t K = G::kernel, S = G::stride, P = G::padding;
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      A* __restrict o = out + oh * G::out_w;
      std::fill(o, o + G::out_w, A(0));
      for (std::size_t kh = 0; kh < K; ++kh) {
        const std::ptrdiff_t h = std::ptrdiff_t(oh * S + kh) - std::ptrdiff_t(P);
        if (h < 0 || h >= std::ptrdiff_t(G::in_h)) continue; // padding rows add nothing
        for (std::size_t kw = 0; kw < K; ++kw) {
          const cpu::TapRange cols = cpu::tap_range(kw, G::in_w, G::out_w, S, P);
          // Input column of output ow: ow * S + kw - P (>= 0 inside the range).
          const A* __restrict row = in + std::size_t(h) * G::in_w;
          for (std::size_t ow = cols.first; ow < cols.last; ++ow) o[ow] += row[ow * S + kw - P];
        }
      }
      for (std::size_t ow = 0; ow < G::out_w; ++ow) o[ow] = o[ow] / A(K * K);
    }
  }
  /// The adjoint of avg_plane: every output's dy / (K*K) added onto the elements of its window.
  /// The taps of a row run from the last column to the first, so each input element receives
  /// its windows in row-major order (windows further left come from larger kw).
  template <class G, class A>
  static void avg_plane_backward(const A* __restrict dy, A* __restrict dx) {
    constexpr std::size_t K = G::kernel, S = G::stride, P = G::padding;
    std::fill(dx, dx + G::in_h * G::in_w, A(0));
    A g[G::out_w];
    for (std::size_t oh = 0; oh < G::out_h; ++oh) {
      for (std::size_t ow = 0; ow < G::out_w; ++ow) g[ow] = dy[oh * G::out_w + ow] / A(K * K);
      for (std::size_t kh = 0; kh < K; ++kh) {
        const std::ptrdiff_t h = std::ptrdiff_t(oh * S + kh) - std::ptrdiff_t(P);
        if (h < 0 || h >= std::ptrdiff_t(G::in_h)) continue;
        A* __restrict row = dx + std::size_t(h) * G::in_w;
        for (std::size_t kw = K; kw-- > 0;) {
          const cpu::TapRange cols = cpu::tap_range(kw, G::in_w, G::out_w, S, P);
          for (std::size_t ow = cols.first; ow < cols.last; ++ow) row[ow * S + kw - P] += g[ow];
        }
      }
    }
  }
  /// Sum of n values in double: eight interleaved partial sums (vectorisable), then in a fixed order.
  template <class A>
  static double plane_sum(const A* __restrict p, std::size_t n) {
    double part[8] = {};
    const std::size_t whole = n / 8 * 8;
    for (std::size_t i = 0; i < whole; i += 8)
      for (std::size_t l = 0; l < 8; ++l) part[l] += double(p[i + l]);
    for (std::size_t i = whole; i < n; ++i) part[i - whole] += double(p[i]);
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }

  /// The common 2x2 window: two branch-free passes that vectorise.
  template <class G, class T>
  static constexpr bool two_by_two =
      std::is_same_v<T, float>&& G::kernel == 2 && G::stride == 2 && G::padding == 0 && G::in_w % 2 == 0;

  /// The larger of each horizontal pair (left wins ties), then the larger of two such rows (top
  /// wins ties): exactly the first maximum in row-major window order, NaN handling included.
  /// Odd heights drop the last row, as PyTorch's floor mode does.
  template <class G>
  static void forward_planes_2x2(const float* __restrict in, float* __restrict out, std::uint32_t* __restrict idx,
                                 std::size_t planes) {
    constexpr std::size_t pairs = G::in_h * G::in_w / 2, wo = G::out_w;
    float* __restrict hv = cpu::detail::pool_scratch(2 * pairs * planes);
    std::int32_t* __restrict hr = reinterpret_cast<std::int32_t*>(hv + pairs * planes);
    cpu::detail::horizontal_pairs(cpu::active_isa(), in, hv, hr, pairs * planes);
    for (std::size_t p = 0; p < planes; ++p)
      for (std::size_t oh = 0; oh < G::out_h; ++oh) {
        const float* __restrict top = hv + p * pairs + 2 * oh * wo;
        const float* __restrict bottom = top + wo;
        const std::int32_t* __restrict top_r = hr + p * pairs + 2 * oh * wo;
        const std::int32_t* __restrict bottom_r = top_r + wo;
        float* __restrict o = out + (p * G::out_h + oh) * wo;
        std::uint32_t* __restrict ix = idx + (p * G::out_h + oh) * wo;
        const std::uint32_t row0 = std::uint32_t(2 * oh * G::in_w);
        for (std::size_t ow = 0; ow < wo; ++ow) {
          const bool down = cpu::detail::takes_max(bottom[ow], top[ow]);
          o[ow] = down ? bottom[ow] : top[ow];
          ix[ow] = row0 + (down ? std::uint32_t(G::in_w) : 0u) + std::uint32_t(2 * ow) +
                   std::uint32_t(down ? bottom_r[ow] : top_r[ow]);
        }
      }
  }

  /// Any window, stride and padding, one plane.
  template <class G, class T>
  static void forward_plane(const T* __restrict in, T* __restrict out, std::uint32_t* __restrict idx) {
    for (std::size_t oh = 0; oh < G::out_h; ++oh)
      for (std::size_t ow = 0; ow < G::out_w; ++ow) {
        const std::ptrdiff_t h0 = std::ptrdiff_t(oh * G::stride) - std::ptrdiff_t(G::padding);
        const std::ptrdiff_t w0 = std::ptrdiff_t(ow * G::stride) - std::ptrdiff_t(G::padding);
        using A = accumulator_t<T>;
        A best = -std::numeric_limits<A>::infinity();
        std::uint32_t best_at = 0;
        bool first = true;
        for (std::ptrdiff_t h = std::max<std::ptrdiff_t>(h0, 0); h < std::min<std::ptrdiff_t>(h0 + G::kernel, G::in_h);
             ++h)
          for (std::ptrdiff_t w = std::max<std::ptrdiff_t>(w0, 0);
               w < std::min<std::ptrdiff_t>(w0 + G::kernel, G::in_w); ++w) {
            const A v = A(in[h * G::in_w + w]);
            if (first || cpu::detail::takes_max(v, best)) {
              best = v;
              best_at = std::uint32_t(h * G::in_w + w);
              first = false;
            }
          }
        out[oh * G::out_w + ow] = T(best);
        idx[oh * G::out_w + ow] = best_at;
      }
  }
};

// The entry points, defined out of the class and not inline: a translation unit built against
// the compiled kernel library (COHORT_COMPILED_KERNELS) declares the instantiations it finds
// there `extern template` and instantiates none of this (backend/cpu/compiled_instances.hpp).

template <class G, class T>
void ops::PoolKernels<Cpu>::max_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch, workspace<G, T>& ws) {
  ws.reserve(batch);
  std::uint32_t* arg = ws.argmax.data();
  ctx.threads().parallel_for(batch * G::channels, 16, [x, y, arg](std::size_t p0, std::size_t p1) {
    if constexpr (two_by_two<G, float> && (std::is_same_v<T, float> || cpu::is_half_type<T>)) {
      // Planes in chunks: one horizontal pass over a chunk's rows (pairs never straddle a row
      // when the width is even), then the vertical pass row pair by row pair. 16-bit storage
      // goes through float copies of the chunk.
      constexpr std::size_t chunk = std::max<std::size_t>(1, 8192 / (G::in_h * G::in_w));
      constexpr std::size_t in_plane = G::in_h * G::in_w, out_plane = G::out_h * G::out_w;
      const Isa isa = cpu::active_isa();
      for (std::size_t q0 = p0; q0 < p1; q0 += chunk) {
        const std::size_t q1 = std::min(p1, q0 + chunk), planes = q1 - q0;
        if constexpr (std::is_same_v<T, float>) {
          forward_planes_2x2<G>(x + q0 * in_plane, y + q0 * out_plane, arg + q0 * out_plane, planes);
        } else {
          float* xf = cpu::convert_scratch(0, planes * in_plane);
          float* yf = cpu::convert_scratch(1, planes * out_plane);
          cpu::load_floats(isa, x + q0 * in_plane, xf, planes * in_plane);
          forward_planes_2x2<G>(xf, yf, arg + q0 * out_plane, planes);
          cpu::store_floats(isa, yf, y + q0 * out_plane, planes * out_plane);
        }
      }
    } else {
      for (std::size_t plane = p0; plane < p1; ++plane)
        forward_plane<G>(x + plane * G::in_h * G::in_w, y + plane * G::out_h * G::out_w,
                         arg + plane * G::out_h * G::out_w);
    }
  });
}

template <class G, class T>
void ops::PoolKernels<Cpu>::max_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch, workspace<G, T>& ws) {
  const std::uint32_t* arg = ws.argmax.data();
  constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
  ctx.threads().parallel_for(batch * G::channels, 16, [dy, dx, arg](std::size_t p0, std::size_t p1) {
    T* __restrict d = dx;
    const T* __restrict g = dy;
    const std::uint32_t* __restrict a = arg;
    std::fill(d + p0 * in_plane, d + p1 * in_plane, T(0));
    for (std::size_t plane = p0; plane < p1; ++plane)
      for (std::size_t i = 0; i < out_plane; ++i)
        if constexpr (std::is_same_v<T, accumulator_t<T>>) {
          d[plane * in_plane + a[plane * out_plane + i]] += g[plane * out_plane + i];
        } else { // 16-bit storage: add in float (windows that overlap add more than once)
          T& t = d[plane * in_plane + a[plane * out_plane + i]];
          t = T(float(t) + float(g[plane * out_plane + i]));
        }
  });
}

template <class G, class T>
void ops::PoolKernels<Cpu>::avg_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch) {
  each_plane_in_float<G::in_h * G::in_w, G::out_h * G::out_w>(ctx, x, y, batch * G::channels,
                                                              [](const auto* in, auto* out) { avg_plane<G>(in, out); });
}

template <class G, class T>
void ops::PoolKernels<Cpu>::avg_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch) {
  each_plane_in_float<G::out_h * G::out_w, G::in_h * G::in_w>(
      ctx, dy, dx, batch * G::channels, [](const auto* in, auto* out) { avg_plane_backward<G>(in, out); });
}

template <class G, class T>
void ops::PoolKernels<Cpu>::global_avg_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch) {
  const Isa isa = cpu::active_isa();
  ctx.threads().parallel_for(batch * G::channels, 64, [x, y, isa](std::size_t p0, std::size_t p1) {
    for (std::size_t plane = p0; plane < p1; ++plane) {
      using A = accumulator_t<T>;
      double sum;
      if constexpr (std::is_same_v<T, A>) {
        sum = plane_sum(x + plane * G::plane, G::plane);
      } else {
        float* xf = cpu::convert_scratch(0, G::plane);
        cpu::load_floats(isa, x + plane * G::plane, xf, G::plane);
        sum = plane_sum(xf, G::plane);
      }
      y[plane] = T(A(sum / double(G::plane)));
    }
  });
}

template <class G, class T>
void ops::PoolKernels<Cpu>::global_avg_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch) {
  ctx.threads().parallel_for(batch * G::channels, 64, [dy, dx](std::size_t p0, std::size_t p1) {
    using A = accumulator_t<T>;
    for (std::size_t plane = p0; plane < p1; ++plane) {
      const T g = T(A(dy[plane]) / A(G::plane));
      std::fill(dx + plane * G::plane, dx + (plane + 1) * G::plane, g);
    }
  });
}

} // namespace cohort

#pragma GCC diagnostic pop
