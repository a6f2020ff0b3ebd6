#pragma once
/// \file
/// BatchNorm2d and BatchNorm1d on the CPU. Per-channel sums are accumulated in double, as
/// PyTorch's CPU kernel does, so statistics match it to float rounding.
///
/// BatchNorm1d's (N, Features) batches are geometries of plane 1: a channel is a column, not a
/// plane, so they take a path of their own (features_*) that walks the rows and vectorises
/// across the channels.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/relu_pool.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"

namespace cohort {

namespace cpu::detail {
/// Channel sums in double, eight interleaved partial sums (element i of a sample's plane goes to
/// lane i % 8) added in a fixed order at the end: vectorisable, and the same result for any
/// thread count.
struct LaneSums {
  static constexpr std::size_t lanes = 8;
  double part[lanes] = {};

  template <class T>
  void add(const T* __restrict p, std::size_t n) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) part[l] += double(p[i + l]);
    for (std::size_t i = whole; i < n; ++i) part[i - whole] += double(p[i]);
  }
  template <class T>
  void add_squared_deviation(const T* __restrict p, std::size_t n, double mean) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) {
        const double d = double(p[i + l]) - mean;
        part[l] += d * d;
      }
    for (std::size_t i = whole; i < n; ++i) {
      const double d = double(p[i]) - mean;
      part[i - whole] += d * d;
    }
  }
  /// sum dy and sum dy * (x - mean) * invstd, in the same lanes.
  template <class T>
  static void add_grad(const T* __restrict x, const T* __restrict dy, std::size_t n, double mean, double invstd,
                       LaneSums& sum_dy, LaneSums& sum_dy_xhat) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) {
        sum_dy.part[l] += double(dy[i + l]);
        sum_dy_xhat.part[l] += double(dy[i + l]) * (double(x[i + l]) - mean) * invstd;
      }
    for (std::size_t i = whole; i < n; ++i) {
      sum_dy.part[i - whole] += double(dy[i]);
      sum_dy_xhat.part[i - whole] += double(dy[i]) * (double(x[i]) - mean) * invstd;
    }
  }
  double total() const noexcept {
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }
};
/// D doubles in a vector (the float path's accumulators), D = 4 or 8; fvec<D> = vec<D>.
template <int D>
struct dvec_of;
template <>
struct dvec_of<4> {
  typedef double type __attribute__((vector_size(32)));
};
template <>
struct dvec_of<8> {
  typedef double type __attribute__((vector_size(64)));
};
template <int D>
using dvec = typename dvec_of<D>::type;
template <int D>
using fvec = vec<D>;

/// Float path: channel sums in double, D lanes x 2 independent accumulators (element i of a
/// plane goes to lane i % 2D), then the lanes in a fixed order: the same result for any thread
/// count. sum x and sum x^2 in one pass.
template <int D>
COHORT_ALWAYS_INLINE void moments_impl(const float* __restrict p, std::size_t n, double* acc) {
  dvec<D> s0, s1, q0, q1;
  __builtin_memcpy(&s0, acc, sizeof s0);
  __builtin_memcpy(&s1, acc + D, sizeof s1);
  __builtin_memcpy(&q0, acc + 2 * D, sizeof q0);
  __builtin_memcpy(&q1, acc + 3 * D, sizeof q1);
  std::size_t i = 0;
  for (; i + 2 * D <= n; i += 2 * D) {
    fvec<D> a, b;
    __builtin_memcpy(&a, p + i, sizeof a);
    __builtin_memcpy(&b, p + i + D, sizeof b);
    const dvec<D> x0 = __builtin_convertvector(a, dvec<D>), x1 = __builtin_convertvector(b, dvec<D>);
    s0 += x0;
    s1 += x1;
    q0 += x0 * x0;
    q1 += x1 * x1;
  }
  __builtin_memcpy(acc, &s0, sizeof s0);
  __builtin_memcpy(acc + D, &s1, sizeof s1);
  __builtin_memcpy(acc + 2 * D, &q0, sizeof q0);
  __builtin_memcpy(acc + 3 * D, &q1, sizeof q1);
  for (std::size_t l = 0; i < n && l < 2 * D; ++i, ++l) { // the tail (< 2D): lanes 0.. of the first sums
    const double x = double(p[i]);
    acc[l] += x;
    acc[2 * D + l] += x * x;
  }
}
/// sum dy' and sum dy' * x in double, dy' = dy where mask > 0 (a fused ReLU's output) or dy.
template <int D>
COHORT_ALWAYS_INLINE void grad_sums_impl(const float* __restrict x, const float* __restrict dy,
                                         const float* __restrict mask, std::size_t n, double* acc) {
  dvec<D> s0, s1, q0, q1;
  __builtin_memcpy(&s0, acc, sizeof s0);
  __builtin_memcpy(&s1, acc + D, sizeof s1);
  __builtin_memcpy(&q0, acc + 2 * D, sizeof q0);
  __builtin_memcpy(&q1, acc + 3 * D, sizeof q1);
  const fvec<D> zero{};
  std::size_t i = 0;
  for (; i + 2 * D <= n; i += 2 * D) {
    fvec<D> xa, xb, ga, gb;
    __builtin_memcpy(&xa, x + i, sizeof xa);
    __builtin_memcpy(&xb, x + i + D, sizeof xb);
    __builtin_memcpy(&ga, dy + i, sizeof ga);
    __builtin_memcpy(&gb, dy + i + D, sizeof gb);
    if (mask) {
      fvec<D> ma, mb;
      __builtin_memcpy(&ma, mask + i, sizeof ma);
      __builtin_memcpy(&mb, mask + i + D, sizeof mb);
      ga = ma > zero ? ga : zero;
      gb = mb > zero ? gb : zero;
    }
    const dvec<D> g0 = __builtin_convertvector(ga, dvec<D>), g1 = __builtin_convertvector(gb, dvec<D>);
    s0 += g0;
    s1 += g1;
    q0 += g0 * __builtin_convertvector(xa, dvec<D>);
    q1 += g1 * __builtin_convertvector(xb, dvec<D>);
  }
  __builtin_memcpy(acc, &s0, sizeof s0);
  __builtin_memcpy(acc + D, &s1, sizeof s1);
  __builtin_memcpy(acc + 2 * D, &q0, sizeof q0);
  __builtin_memcpy(acc + 3 * D, &q1, sizeof q1);
  for (std::size_t l = 0; i < n && l < 2 * D; ++i, ++l) {
    const double g = !mask || mask[i] > 0.f ? double(dy[i]) : 0.0;
    acc[l] += g;
    acc[2 * D + l] += g * double(x[i]);
  }
}
COHORT_TARGET_AVX512 inline void moments_avx512(const float* p, std::size_t n, double* acc) {
  COHORT_ISA_ENTRY(Isa::avx512);
  moments_impl<8>(p, n, acc);
}
COHORT_TARGET_AVX2 inline void moments_avx2(const float* p, std::size_t n, double* acc) {
  COHORT_ISA_ENTRY(Isa::avx2);
  moments_impl<4>(p, n, acc);
}
COHORT_TARGET_AVX512 inline void grad_sums_avx512(const float* x, const float* dy, const float* m, std::size_t n,
                                                  double* acc) {
  COHORT_ISA_ENTRY(Isa::avx512);
  grad_sums_impl<8>(x, dy, m, n, acc);
}
COHORT_TARGET_AVX2 inline void grad_sums_avx2(const float* x, const float* dy, const float* m, std::size_t n,
                                              double* acc) {
  COHORT_ISA_ENTRY(Isa::avx2);
  grad_sums_impl<4>(x, dy, m, n, acc);
}
/// Doubles per vector of the float path for an instruction set.
inline std::size_t bn_lanes(Isa isa) noexcept { return isa == Isa::avx512 ? 8 : 4; }
inline void moments(Isa isa, const float* p, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    moments_avx512(p, n, acc);
  else if (isa == Isa::avx2)
    moments_avx2(p, n, acc);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    moments_impl<4>(p, n, acc);
  }
}
inline void grad_sums(Isa isa, const float* x, const float* dy, const float* m, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    grad_sums_avx512(x, dy, m, n, acc);
  else if (isa == Isa::avx2)
    grad_sums_avx2(x, dy, m, n, acc);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    grad_sums_impl<4>(x, dy, m, n, acc);
  }
}
/// y = x * scale + shift (then the ReLU layer's rule when `relu`), the float path's one
/// normalisation loop: fused and unfused runs share it, so they agree bit for bit.
COHORT_ALWAYS_INLINE void normalize_impl(const float* __restrict x, float* __restrict y, std::size_t n, float scale,
                                         float shift, bool relu) {
  if (relu)
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x[i] * scale + shift;
      y[i] = v > 0.f ? v : 0.f;
    }
  else
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}
/// One (H, W) plane normalised into `scratch`, then ReLU + 2x2 max-pool into `pooled`/`win`.
template <int W>
COHORT_ALWAYS_INLINE void normalize_relu_pool_impl(const float* x, std::size_t h, std::size_t w, float scale,
                                                   float shift, float* scratch, float* pooled, std::uint8_t* win) {
  normalize_impl(x, scratch, h * w, scale, shift, false);
  const std::size_t pw = w / 2;
  for (std::size_t ph = 0; ph < h / 2; ++ph)
    relu_pool_rows<W>(scratch + 2 * ph * w, scratch + (2 * ph + 1) * w, pw, pooled + ph * pw, win + ph * pw);
}
COHORT_TARGET_AVX512 inline void normalize_avx512(const float* x, float* y, std::size_t n, float a, float b, bool r) {
  COHORT_ISA_ENTRY(Isa::avx512);
  normalize_impl(x, y, n, a, b, r);
}
COHORT_TARGET_AVX2 inline void normalize_avx2(const float* x, float* y, std::size_t n, float a, float b, bool r) {
  COHORT_ISA_ENTRY(Isa::avx2);
  normalize_impl(x, y, n, a, b, r);
}
inline void normalize(Isa isa, const float* x, float* y, std::size_t n, float scale, float shift, bool relu) {
  if (isa == Isa::avx512)
    normalize_avx512(x, y, n, scale, shift, relu);
  else if (isa == Isa::avx2)
    normalize_avx2(x, y, n, scale, shift, relu);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    normalize_impl(x, y, n, scale, shift, relu);
  }
}
COHORT_TARGET_AVX512 inline void normalize_relu_pool_avx512(const float* x, std::size_t h, std::size_t w, float a,
                                                            float b, float* s, float* p, std::uint8_t* win) {
  COHORT_ISA_ENTRY(Isa::avx512);
  normalize_relu_pool_impl<16>(x, h, w, a, b, s, p, win);
}
COHORT_TARGET_AVX2 inline void normalize_relu_pool_avx2(const float* x, std::size_t h, std::size_t w, float a, float b,
                                                        float* s, float* p, std::uint8_t* win) {
  COHORT_ISA_ENTRY(Isa::avx2);
  normalize_relu_pool_impl<8>(x, h, w, a, b, s, p, win);
}
inline void normalize_relu_pool(Isa isa, const float* x, std::size_t h, std::size_t w, float scale, float shift,
                                float* scratch, float* pooled, std::uint8_t* win) {
  if (isa == Isa::avx512)
    normalize_relu_pool_avx512(x, h, w, scale, shift, scratch, pooled, win);
  else if (isa == Isa::avx2)
    normalize_relu_pool_avx2(x, h, w, scale, shift, scratch, pooled, win);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    normalize_relu_pool_impl<4>(x, h, w, scale, shift, scratch, pooled, win);
  }
}
/// Per-thread room for one plane plus the slack relu_pool_rows reads past it.
inline float* plane_scratch(std::size_t n) {
  thread_local HostBuffer<float> buffer;
  if (buffer.size() < n + 64) buffer.resize(n + 64);
  return buffer.data();
}

/// The two sums of an accumulator block of 4 x D lanes: lanes of (s0, s1) then of (q0, q1),
/// pairwise in a fixed order.
inline void lane_totals(const double* acc, std::size_t d, double& first, double& second) {
  double a[16], b[16];
  for (std::size_t l = 0; l < 2 * d; ++l) a[l] = acc[l], b[l] = acc[2 * d + l];
  for (std::size_t w = d; w > 0; w /= 2)
    for (std::size_t l = 0; l < w; ++l) a[l] += a[l + w], b[l] += b[l + w];
  first = a[0];
  second = b[0];
}
} // namespace cpu::detail

template <>
struct ops::BatchNormKernels<Cpu> {
  template <class G, class T>
  struct workspace {
    HostBuffer<double> mean, var, invstd;         // (C): batch statistics, or running ones in eval mode
    std::size_t count = 0;                        // values per channel in the last training batch
    HostBuffer<double> sums;                      // (C, 32): a channel's lane sums (float path)
    std::vector<cpu::detail::LaneSums> lane_sums; // (2C): the same for the double path
    HostBuffer<std::uint8_t> window;              // fused pool: argmax of each window (2*down + right)
    HostBuffer<double> feature_sums;              // plane 1: (2, C) gradient sums
    HostBuffer<accumulator_t<T>> coefficients;    // plane 1: (2, C) per-channel factors of y
    HostBuffer<double> feature_coefficients;      // plane 1: (4, C) per-channel factors of dx
    void reserve(std::size_t) {
      mean.resize(G::channels);
      var.resize(G::channels);
      invstd.resize(G::channels);
      sums.resize(G::channels * 32);
      lane_sums.resize(2 * G::channels);
      if constexpr (G::plane == 1) {
        feature_sums.resize(2 * G::channels);
        coefficients.resize(2 * G::channels);
        feature_coefficients.resize(4 * G::channels);
      }
    }
  };

  /// float and the 16-bit storage types take the vectorised float path (the latter converted
  /// plane by plane); double (gradient checks) the reference path.
  template <class T>
  static constexpr bool float_path = std::is_same_v<T, float> || cpu::is_half_type<T>;

  /// A following ReLU can be applied inside the kernels (the executor then skips it); float only
  /// (double runs the gradient checks, which compare against the unfused layers).
  template <class T>
  static constexpr bool fuses_relu = float_path<T>;

  /// A following ReLU and 2x2, stride-2 max-pool (geometry PG) can run inside the kernels: the
  /// normalised activation and its gradient then never go to memory at full size.
  template <class G, class PG, class T>
  static constexpr bool fuses_relu_pool = float_path<T>&& PG::kernel == 2 && PG::stride == 2 && PG::padding == 0 &&
                                          PG::channels == G::channels&& PG::in_h* PG::in_w == G::plane;

  /// `relu`: write max(y, 0) (a fused ReLU).
  template <class G, class T>
  static void forward_train(CpuContext& ctx, const T* x, const accumulator_t<T>* gamma, const accumulator_t<T>* beta,
                            T* y, std::size_t batch, float eps, workspace<G, T>& ws, bool relu = false) {
    if constexpr (G::plane == 1) {
      features_statistics<G>(ctx, x, batch, eps, ws);
      return features_normalize<G>(ctx, x, gamma, beta, y, batch, ws, relu);
    }
    start_training<G>(batch, ws);
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      batch_statistics<G>(x, batch, c0, c1, eps, ws);
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c)
          normalize_plane<G>(x, y, n, c, ws.mean[c], ws.invstd[c], gamma[c], beta[c], relu);
    });
  }

  template <class G, class T, class S>
  static void update_running(CpuContext&, S* running_mean, S* running_var, std::size_t, float momentum,
                             workspace<G, T>& ws) {
    const double mom = double(momentum);
    const double m = double(ws.count);
    for (std::size_t c = 0; c < G::channels; ++c) {
      running_mean[c] = S(mom * ws.mean[c] + (1.0 - mom) * double(running_mean[c]));
      running_var[c] = S(mom * (ws.var[c] * m / (m - 1.0)) + (1.0 - mom) * double(running_var[c]));
    }
  }

  template <class G, class T, class S>
  static void forward_eval(CpuContext& ctx, const T* x, const accumulator_t<T>* gamma, const accumulator_t<T>* beta,
                           const S* running_mean, const S* running_var, T* y, std::size_t batch, float eps,
                           workspace<G, T>& ws, bool relu = false) {
    ws.reserve(batch);
    running_statistics<G>(running_mean, running_var, eps, ws);
    if constexpr (G::plane == 1) return features_normalize<G>(ctx, x, gamma, beta, y, batch, ws, relu);
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c)
          normalize_plane<G>(x, y, n, c, ws.mean[c], ws.invstd[c], gamma[c], beta[c], relu);
    });
  }

  /// Uses the statistics the forward pass saved (batch ones in training, running ones in eval).
  /// `relu_y`: the output of a fused ReLU (dy is then that ReLU's output gradient).
  template <class G, class T>
  static void backward(CpuContext& ctx, bool training, const T* x, const accumulator_t<T>* gamma, const T* dy, T* dx,
                       accumulator_t<T>* dgamma, accumulator_t<T>* dbeta, std::size_t batch, bool accumulate,
                       workspace<G, T>& ws, const T* relu_y = nullptr) {
    if constexpr (G::plane == 1)
      return features_backward<G>(ctx, training, x, gamma, dy, dx, dgamma, dbeta, batch, accumulate, ws, relu_y);
    const Isa isa = cpu::active_isa();
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      // sum dy' and sum dy' * x per channel, sample by sample (contiguous memory).
      if constexpr (float_path<T>) {
        std::fill(ws.sums.data() + c0 * 32, ws.sums.data() + c1 * 32, 0.0);
        for (std::size_t n = 0; n < batch; ++n)
          for (std::size_t c = c0; c < c1; ++c) {
            const std::size_t at = n * G::size + c * G::plane;
            cpu::detail::grad_sums(isa, plane<G>(x + at, 0), plane<G>(dy + at, 1),
                                   relu_y ? plane<G>(relu_y + at, 2) : nullptr, G::plane, ws.sums.data() + c * 32);
          }
      } else {
        // (ReLU fusion is float-only: fuses_relu<T> above.)
        for (std::size_t c = c0; c < c1; ++c) ws.lane_sums[2 * c] = ws.lane_sums[2 * c + 1] = {};
        for (std::size_t n = 0; n < batch; ++n)
          for (std::size_t c = c0; c < c1; ++c)
            cpu::detail::LaneSums::add_grad(x + n * G::size + c * G::plane, dy + n * G::size + c * G::plane, G::plane,
                                            ws.mean[c], ws.invstd[c], ws.lane_sums[2 * c], ws.lane_sums[2 * c + 1]);
      }
      for (std::size_t c = c0; c < c1; ++c) finish_grad_sums<G>(isa, c, gamma, dgamma, dbeta, accumulate, ws);
      if (!dx) return;
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c) {
          const std::size_t at = n * G::size + c * G::plane;
          if constexpr (float_path<T>) {
            // dx = (dy - mean(dy) - (x - mean) * k) * invstd * gamma, in float as PyTorch's CPU kernel.
            const DxCoefficients k = dx_coefficients<G>(training, batch, c, gamma, ws);
            const float* __restrict xp = plane<G>(x + at, 0);
            const float* __restrict gp = plane<G>(dy + at, 1);
            const float* __restrict mp = relu_y ? plane<G>(relu_y + at, 2) : nullptr;
            float* __restrict out = staging<G>(dx + at);
            if (mp)
              for (std::size_t i = 0; i < G::plane; ++i)
                out[i] = ((mp[i] > 0.f ? gp[i] : 0.f) - k.mean_dy - (xp[i] - k.mu) * k.k) * k.scale;
            else
              for (std::size_t i = 0; i < G::plane; ++i) out[i] = (gp[i] - k.mean_dy - (xp[i] - k.mu) * k.k) * k.scale;
            unstage<G>(isa, out, dx + at);
          } else {
            const T* __restrict xp = x + at;
            const T* __restrict gp = dy + at;
            T* __restrict out = dx + at;
            const double mean = ws.mean[c], invstd = ws.invstd[c], g = double(gamma[c]) * invstd;
            const double m = double(batch * G::plane);
            const double sum_dy = ws.lane_sums[2 * c].total(), sum_dy_xhat = ws.lane_sums[2 * c + 1].total();
            if (training) {
              const double mean_dy = sum_dy / m, mean_dy_xhat = sum_dy_xhat / m;
              for (std::size_t i = 0; i < G::plane; ++i) {
                const double xhat = (double(xp[i]) - mean) * invstd;
                out[i] = T(g * (double(gp[i]) - mean_dy - xhat * mean_dy_xhat));
              }
            } else {
              for (std::size_t i = 0; i < G::plane; ++i) out[i] = T(g * double(gp[i]));
            }
          }
        }
    });
  }

  /// BatchNorm2d -> ReLU -> MaxPool2d<2> (when fuses_relu_pool), training mode: writes the pool's
  /// output and keeps each window's argmax for backward_relu_pool.
  template <class G, class PG, class T>
  static void forward_train_relu_pool(CpuContext& ctx, const T* x, const float* gamma, const float* beta, T* pooled,
                                      std::size_t batch, float eps, workspace<G, T>& ws) {
    start_training<G>(batch, ws);
    if (ws.window.size() < batch * PG::out_size) ws.window.resize(batch * PG::out_size);
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      batch_statistics<G>(x, batch, c0, c1, eps, ws);
      normalize_relu_pool<G, PG>(x, pooled, batch, c0, c1, gamma, beta, ws);
    });
  }
  /// The same in evaluation mode (running statistics).
  template <class G, class PG, class T, class S>
  static void forward_eval_relu_pool(CpuContext& ctx, const T* x, const float* gamma, const float* beta,
                                     const S* running_mean, const S* running_var, T* pooled, std::size_t batch,
                                     float eps, workspace<G, T>& ws) {
    ws.reserve(batch);
    if (ws.window.size() < batch * PG::out_size) ws.window.resize(batch * PG::out_size);
    running_statistics<G>(running_mean, running_var, eps, ws);
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      normalize_relu_pool<G, PG>(x, pooled, batch, c0, c1, gamma, beta, ws);
    });
  }

  /// Backward of the fused three: `dpool` is the gradient of the pool's output, `pooled` that
  /// output. The ReLU's and the pool's gradient is dpool at each window's argmax where the
  /// pooled value is > 0, 0 elsewhere. Each plane's gradient is scattered into a dense scratch
  /// plane (in L1) and then summed and applied by backward()'s own vectorised loops, so the
  /// result is bitwise the unfused one. (Summing and applying at the argmax positions only, with
  /// a branch on the data per cell, was 1.4-1.6x slower: model B's first BatchNorm backward took
  /// 1.36 ms of an 11 ms step, 1.0 ms now. Each plane is unpooled twice, for the sums and for dX:
  /// cheaper than keeping a batch of dense planes.)
  template <class G, class PG, class T>
  static void backward_relu_pool(CpuContext& ctx, bool training, const T* x, const float* gamma, const T* dpool,
                                 const T* pooled, T* dx, float* dgamma, float* dbeta, std::size_t batch,
                                 bool accumulate, workspace<G, T>& ws) {
    const Isa isa = cpu::active_isa();
    constexpr std::size_t pw = PG::out_w, cells = PG::out_h * PG::out_w;
    const std::uint8_t* window = ws.window.data();
    // Sample n's channel c gradient at full size: dpool at each window's argmax where the
    // pooled value is > 0, zeros elsewhere. Which cells pass a gradient on is data (half of them
    // after a ReLU): selected with a mask, as a branch here mispredicted on every other cell.
    const auto unpool = [&](std::size_t n, std::size_t c, float* __restrict g) {
      std::fill(g, g + G::plane, 0.f);
      const std::size_t base = (n * PG::channels + c) * cells;
      for (std::size_t oh = 0; oh < PG::out_h; ++oh)
        for (std::size_t ow = 0; ow < pw; ++ow) {
          const std::size_t i = base + oh * pw + ow;
          const std::uint8_t a = window[i];
          const std::uint32_t keep = 0u - std::uint32_t(cpu::to_float(pooled[i]) > 0.f);
          g[(2 * oh + (a >> 1)) * PG::in_w + 2 * ow + (a & 1)] =
              std::bit_cast<float>(std::bit_cast<std::uint32_t>(cpu::to_float(dpool[i])) & keep);
        }
    };
    each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      float* g = cpu::detail::plane_scratch(G::plane);
      std::fill(ws.sums.data() + c0 * 32, ws.sums.data() + c1 * 32, 0.0);
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c) {
          unpool(n, c, g);
          cpu::detail::grad_sums(isa, plane<G>(x + n * G::size + c * G::plane, 0), g, nullptr, G::plane,
                                 ws.sums.data() + c * 32);
        }
      for (std::size_t c = c0; c < c1; ++c) finish_grad_sums<G>(isa, c, gamma, dgamma, dbeta, accumulate, ws);
      if (!dx) return;
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c) {
          const DxCoefficients k = dx_coefficients<G>(training, batch, c, gamma, ws);
          const std::size_t at = n * G::size + c * G::plane;
          const float* __restrict xp = plane<G>(x + at, 0);
          float* __restrict out = staging<G>(dx + at);
          unpool(n, c, g);
          for (std::size_t i = 0; i < G::plane; ++i) out[i] = (g[i] - k.mean_dy - (xp[i] - k.mu) * k.k) * k.scale;
          unstage<G>(isa, out, dx + at);
        }
    });
  }

 private:
  /// Splits the channels between the threads; each task visits its channels sample by sample,
  /// so it reads long contiguous runs (one per sample) instead of one short plane per sample and
  /// channel. Every channel is summed in the same order whatever the split.
  template <class G, class Fn>
  static void each_channel_range(CpuContext& ctx, Fn&& fn) {
    ctx.threads().parallel_for(G::channels, 1, std::forward<Fn>(fn));
  }

  // ---- plane 1 (BatchNorm1d): (N, C) rows, vectorised across the channels ----------------------

  /// Splits the channels between the threads in runs long enough to vectorise; each task walks
  /// every row for its channels, so every sum runs over the samples in order whatever the split.
  template <class G, class Fn>
  static void each_feature_range(CpuContext& ctx, Fn&& fn) {
    ctx.threads().parallel_for(G::channels, 64, std::forward<Fn>(fn));
  }
  /// Channels [c0, c1) of row n as accumulator-type values: the row itself, or (16-bit storage)
  /// converted into per-thread scratch `slot`.
  template <class G, class T>
  static const accumulator_t<T>* feature_row(const T* p, std::size_t n, std::size_t c0, std::size_t c1, int slot) {
    if constexpr (std::is_same_v<T, accumulator_t<T>>) {
      return p + n * G::channels + c0;
    } else {
      float* out = cpu::convert_scratch(slot, c1 - c0);
      cpu::load_floats(cpu::active_isa(), p + n * G::channels + c0, out, c1 - c0);
      return out;
    }
  }
  /// Where channels [c0, c1) of an output row are computed: the row itself, or scratch slot 3.
  template <class G, class T>
  static accumulator_t<T>* feature_out(T* p, std::size_t n, std::size_t c0, std::size_t c1) {
    if constexpr (std::is_same_v<T, accumulator_t<T>>)
      return p + n * G::channels + c0;
    else
      return cpu::convert_scratch(3, c1 - c0);
  }
  template <class G, class T>
  static void feature_store(const accumulator_t<T>* out, T* p, std::size_t n, std::size_t c0, std::size_t c1) {
    if constexpr (!std::is_same_v<T, accumulator_t<T>>)
      cpu::store_floats(cpu::active_isa(), out, p + n * G::channels + c0, c1 - c0);
  }

  /// Batch mean and biased variance of every channel (two passes in double: the mean, then the
  /// squared deviations, as PyTorch's CPU kernel), and 1/sqrt(var + eps).
  template <class G, class T>
  static void features_statistics(CpuContext& ctx, const T* x, std::size_t batch, float eps, workspace<G, T>& ws) {
    if (batch < 2)
      throw ValueError(cohort::detail::concat("BatchNorm1d: training needs more than 1 value per feature, found a "
                                              "batch of ",
                                              batch));
    ws.reserve(batch);
    ws.count = batch;
    const double m = double(batch);
    each_feature_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      const std::size_t len = c1 - c0;
      double* __restrict mean = ws.mean.data() + c0;
      double* __restrict var = ws.var.data() + c0;
      std::fill(mean, mean + len, 0.0);
      std::fill(var, var + len, 0.0);
      for (std::size_t n = 0; n < batch; ++n) {
        const accumulator_t<T>* __restrict r = feature_row<G>(x, n, c0, c1, 0);
        for (std::size_t j = 0; j < len; ++j) mean[j] += double(r[j]);
      }
      for (std::size_t j = 0; j < len; ++j) mean[j] /= m;
      for (std::size_t n = 0; n < batch; ++n) {
        const accumulator_t<T>* __restrict r = feature_row<G>(x, n, c0, c1, 0);
        for (std::size_t j = 0; j < len; ++j) {
          const double d = double(r[j]) - mean[j];
          var[j] += d * d;
        }
      }
      for (std::size_t j = 0; j < len; ++j) {
        var[j] /= m;
        ws.invstd[c0 + j] = 1.0 / std::sqrt(var[j] + double(eps));
      }
    });
  }

  /// y = x * scale + shift per channel (folded as normalize_plane folds them), then the ReLU
  /// layer's rule when `relu`; the statistics are in ws.mean / ws.invstd.
  template <class G, class T>
  static void features_normalize(CpuContext& ctx, const T* x, const accumulator_t<T>* gamma,
                                 const accumulator_t<T>* beta, T* y, std::size_t batch, workspace<G, T>& ws,
                                 bool relu) {
    using A = accumulator_t<T>;
    A* scale = ws.coefficients.data();
    A* shift = scale + G::channels;
    for (std::size_t c = 0; c < G::channels; ++c) {
      scale[c] = A(ws.invstd[c] * double(gamma[c]));
      shift[c] = A(double(beta[c]) - ws.mean[c] * ws.invstd[c] * double(gamma[c]));
    }
    each_feature_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      const std::size_t len = c1 - c0;
      const A* __restrict sc = scale + c0;
      const A* __restrict sh = shift + c0;
      for (std::size_t n = 0; n < batch; ++n) {
        const A* __restrict r = feature_row<G>(x, n, c0, c1, 0);
        A* __restrict out = feature_out<G>(y, n, c0, c1);
        if (relu)
          for (std::size_t j = 0; j < len; ++j) {
            const A v = r[j] * sc[j] + sh[j];
            out[j] = v > A(0) ? v : A(0);
          }
        else
          for (std::size_t j = 0; j < len; ++j) out[j] = r[j] * sc[j] + sh[j];
        feature_store<G>(out, y, n, c0, c1);
      }
    });
  }

  /// dgamma, dbeta and dx from the statistics forward saved; `relu_y` masks dy (a fused ReLU).
  /// Sums of dy' and dy' * (x - mean) in double, and dx = (dy' - mean_dy - (x - mean) * k) * scale
  /// in double too, rounded once: a feature is normalised over the batch alone, often a handful of
  /// values, and the planes' float formula then cancels badly (measured against a double network
  /// with a batch of 4: 1.5e-5 of the largest gradient upstream in float, 1.3e-6 this way).
  template <class G, class T>
  static void features_backward(CpuContext& ctx, bool training, const T* x, const accumulator_t<T>* gamma, const T* dy,
                                T* dx, accumulator_t<T>* dgamma, accumulator_t<T>* dbeta, std::size_t batch,
                                bool accumulate, workspace<G, T>& ws, const T* relu_y) {
    using A = accumulator_t<T>;
    const double m = double(batch);
    each_feature_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
      const std::size_t len = c1 - c0;
      double* __restrict sum_dy = ws.feature_sums.data() + c0;
      double* __restrict sum_dy_xmu = ws.feature_sums.data() + G::channels + c0;
      const double* __restrict mean = ws.mean.data() + c0;
      std::fill(sum_dy, sum_dy + len, 0.0);
      std::fill(sum_dy_xmu, sum_dy_xmu + len, 0.0);
      for (std::size_t n = 0; n < batch; ++n) {
        const A* __restrict xr = feature_row<G>(x, n, c0, c1, 0);
        const A* __restrict gr = feature_row<G>(dy, n, c0, c1, 1);
        const A* __restrict mr = relu_y ? feature_row<G>(relu_y, n, c0, c1, 2) : nullptr;
        for (std::size_t j = 0; j < len; ++j) {
          const double g = !mr || mr[j] > A(0) ? double(gr[j]) : 0.0;
          sum_dy[j] += g;
          sum_dy_xmu[j] += g * (double(xr[j]) - mean[j]);
        }
      }
      // Per channel: the affine gradients, then dx's factors.
      double* mean_dy = ws.feature_coefficients.data();
      double* k = mean_dy + G::channels;
      double* mu = k + G::channels;
      double* scale = mu + G::channels;
      for (std::size_t j = 0; j < len; ++j) {
        const std::size_t c = c0 + j;
        const double invstd = ws.invstd[c], sum_dy_xhat = sum_dy_xmu[j] * invstd;
        dgamma[c] = A(accumulate ? double(dgamma[c]) + sum_dy_xhat : sum_dy_xhat);
        dbeta[c] = A(accumulate ? double(dbeta[c]) + sum_dy[j] : sum_dy[j]);
        scale[c] = invstd * double(gamma[c]);
        mean_dy[c] = training ? sum_dy[j] / m : 0.0;
        k[c] = training ? sum_dy_xhat / m * invstd : 0.0;
        mu[c] = mean[j];
      }
      if (!dx) return;
      for (std::size_t n = 0; n < batch; ++n) {
        const A* __restrict xr = feature_row<G>(x, n, c0, c1, 0);
        const A* __restrict gr = feature_row<G>(dy, n, c0, c1, 1);
        const A* __restrict mr = relu_y ? feature_row<G>(relu_y, n, c0, c1, 2) : nullptr;
        A* __restrict out = feature_out<G>(dx, n, c0, c1);
        const double* __restrict md = mean_dy + c0, * __restrict kk = k + c0, * __restrict mm = mu + c0, * __restrict sc = scale + c0;
        for (std::size_t j = 0; j < len; ++j) {
          const double g = !mr || mr[j] > A(0) ? double(gr[j]) : 0.0;
          out[j] = A((g - md[j] - (double(xr[j]) - mm[j]) * kk[j]) * sc[j]);
        }
        feature_store<G>(out, dx, n, c0, c1);
      }
    });
  }

  template <class G, class T>
  static void start_training(std::size_t batch, workspace<G, T>& ws) {
    ws.reserve(batch);
    const std::size_t m = batch * G::plane;
    if (m < 2)
      throw ValueError(cohort::detail::concat("BatchNorm2d: training needs more than 1 value per channel, found ", m,
                                              " (batch ", batch, " x plane ", G::plane, ")"));
    ws.count = m;
  }

  template <class G, class T, class S>
  static void running_statistics(const S* running_mean, const S* running_var, float eps, workspace<G, T>& ws) {
    for (std::size_t c = 0; c < G::channels; ++c) {
      ws.mean[c] = double(running_mean[c]);
      ws.invstd[c] = 1.0 / std::sqrt(double(running_var[c]) + double(eps));
    }
  }

  /// Mean, variance and 1/sqrt(var + eps) of channels [c0, c1) over the batch, into the workspace.
  template <class G, class T>
  static void batch_statistics(const T* x, std::size_t batch, std::size_t c0, std::size_t c1, float eps,
                               workspace<G, T>& ws) {
    const double m = double(batch * G::plane);
    if constexpr (float_path<T>) {
      // One pass: sum and sum of squares in double (no cancellation worth the name for float data).
      const Isa isa = cpu::active_isa();
      std::fill(ws.sums.data() + c0 * 32, ws.sums.data() + c1 * 32, 0.0);
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c)
          cpu::detail::moments(isa, plane<G>(x + n * G::size + c * G::plane, 0), G::plane, ws.sums.data() + c * 32);
      for (std::size_t c = c0; c < c1; ++c) {
        double sum, sq;
        cpu::detail::lane_totals(ws.sums.data() + c * 32, cpu::detail::bn_lanes(isa), sum, sq);
        ws.mean[c] = sum / m;
        ws.var[c] = std::max(sq / m - ws.mean[c] * ws.mean[c], 0.0);
      }
    } else {
      for (std::size_t c = c0; c < c1; ++c) ws.lane_sums[2 * c] = ws.lane_sums[2 * c + 1] = {};
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c) ws.lane_sums[2 * c].add(x + n * G::size + c * G::plane, G::plane);
      for (std::size_t c = c0; c < c1; ++c) ws.mean[c] = ws.lane_sums[2 * c].total() / m;
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t c = c0; c < c1; ++c)
          ws.lane_sums[2 * c + 1].add_squared_deviation(x + n * G::size + c * G::plane, G::plane, ws.mean[c]);
      for (std::size_t c = c0; c < c1; ++c) ws.var[c] = ws.lane_sums[2 * c + 1].total() / m;
    }
    for (std::size_t c = c0; c < c1; ++c) ws.invstd[c] = 1.0 / std::sqrt(ws.var[c] + double(eps));
  }

  /// dgamma, dbeta of channel c from its lane sums (float path) or LaneSums (double path).
  template <class G, class T>
  static void finish_grad_sums(Isa isa, std::size_t c, const accumulator_t<T>* gamma, accumulator_t<T>* dgamma,
                               accumulator_t<T>* dbeta, bool accumulate, workspace<G, T>& ws) {
    using A = accumulator_t<T>;
    (void)gamma;
    double sum_dy, sum_dy_xhat;
    if constexpr (float_path<T>) {
      double sum_dy_x;
      cpu::detail::lane_totals(ws.sums.data() + c * 32, cpu::detail::bn_lanes(isa), sum_dy, sum_dy_x);
      sum_dy_xhat = (sum_dy_x - ws.mean[c] * sum_dy) * ws.invstd[c];
      // Kept for the dx pass: the sums' lanes are reused as (sum_dy, sum_dy_xhat).
      ws.sums[c * 32] = sum_dy;
      ws.sums[c * 32 + 1] = sum_dy_xhat;
    } else {
      sum_dy = ws.lane_sums[2 * c].total();
      sum_dy_xhat = ws.lane_sums[2 * c + 1].total();
    }
    dgamma[c] = A(accumulate ? double(dgamma[c]) + sum_dy_xhat : sum_dy_xhat);
    dbeta[c] = A(accumulate ? double(dbeta[c]) + sum_dy : sum_dy);
  }

  struct DxCoefficients {
    float scale, mean_dy, k, mu;
  };
  /// dx = (dy - mean_dy - (x - mu) * k) * scale for channel c (float path).
  template <class G, class T>
  static DxCoefficients dx_coefficients(bool training, std::size_t batch, std::size_t c, const float* gamma,
                                        const workspace<G, T>& ws) {
    const double m = double(batch * G::plane), invstd = ws.invstd[c];
    const double sum_dy = ws.sums[c * 32], sum_dy_xhat = ws.sums[c * 32 + 1];
    return {float(invstd * double(gamma[c])), training ? float(sum_dy / m) : 0.f,
            training ? float(sum_dy_xhat / m * invstd) : 0.f, float(ws.mean[c])};
  }

  /// y = x * scale + shift for plane (n, c), scale and shift folded per channel (as PyTorch's
  /// CPU kernel); then the ReLU layer's rule when `relu`.
  template <class G, class T>
  static void normalize_plane(const T* x, T* y, std::size_t n, std::size_t c, double mean, double invstd,
                              accumulator_t<T> gamma, accumulator_t<T> beta, bool relu) {
    using A = accumulator_t<T>;
    const A scale = A(invstd * double(gamma));
    const A shift = A(double(beta) - mean * invstd * double(gamma));
    const std::size_t at = n * G::size + c * G::plane;
    if constexpr (float_path<T>) {
      const Isa isa = cpu::active_isa();
      float* out = staging<G>(y + at);
      cpu::detail::normalize(isa, plane<G>(x + at, 0), out, G::plane, scale, shift, relu);
      unstage<G>(isa, out, y + at);
    } else {
      const T* __restrict p = x + at;
      T* __restrict q = y + at;
      if (relu) {
        for (std::size_t i = 0; i < G::plane; ++i) {
          const T v = T(A(p[i]) * scale + shift);
          q[i] = v > T(0) ? v : T(0); // exactly the ReLU layer's rule
        }
      } else {
        for (std::size_t i = 0; i < G::plane; ++i) q[i] = T(A(p[i]) * scale + shift);
      }
    }
  }

  /// One (C, H, W) plane of T as floats: the plane itself for float, else converted into
  /// per-thread scratch `slot`.
  template <class G, class T>
  static const float* plane(const T* p, int slot) {
    if constexpr (std::is_same_v<T, float>) {
      return p;
    } else {
      float* out = cpu::convert_scratch(slot, G::plane);
      cpu::load_floats(cpu::active_isa(), p, out, G::plane);
      return out;
    }
  }
  /// Where a plane bound for `dst` is computed: dst itself for float, else scratch slot 3.
  template <class G, class T>
  static float* staging(T* dst) {
    if constexpr (std::is_same_v<T, float>)
      return dst;
    else
      return cpu::convert_scratch(3, G::plane);
  }
  template <class G, class T>
  static void unstage(Isa isa, const float* src, T* dst) {
    if constexpr (!std::is_same_v<T, float>) cpu::store_floats(isa, src, dst, G::plane);
  }

  /// Channels [c0, c1) normalised, ReLU'd and 2x2-pooled, sample by sample.
  template <class G, class PG, class T>
  static void normalize_relu_pool(const T* x, T* pooled, std::size_t batch, std::size_t c0, std::size_t c1,
                                  const float* gamma, const float* beta, workspace<G, T>& ws) {
    const Isa isa = cpu::active_isa();
    float* scratch = cpu::detail::plane_scratch(G::plane);
    constexpr std::size_t cells = PG::out_h * PG::out_w;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t c = c0; c < c1; ++c) {
        const double invstd = ws.invstd[c], mean = ws.mean[c];
        const float scale = float(invstd * double(gamma[c]));
        const float shift = float(double(beta[c]) - mean * invstd * double(gamma[c]));
        const std::size_t out = (n * PG::channels + c) * cells;
        float* pooled_f =
            std::is_same_v<T, float> ? reinterpret_cast<float*>(pooled + out) : cpu::convert_scratch(3, cells);
        cpu::detail::normalize_relu_pool(isa, plane<G>(x + n * G::size + c * G::plane, 0), PG::in_h, PG::in_w, scale,
                                         shift, scratch, pooled_f, ws.window.data() + out);
        if constexpr (!std::is_same_v<T, float>) cpu::store_floats(isa, pooled_f, pooled + out, cells);
      }
  }
};

} // namespace cohort
