#pragma once
/// \file
/// BatchNorm2d on the CPU. Per-channel sums are accumulated in double (two passes: mean, then
/// squared deviations), as PyTorch's CPU kernel does, so statistics match it to float rounding.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
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
  moments_impl<8>(p, n, acc);
}
COHORT_TARGET_AVX2 inline void moments_avx2(const float* p, std::size_t n, double* acc) { moments_impl<4>(p, n, acc); }
COHORT_TARGET_AVX512 inline void grad_sums_avx512(const float* x, const float* dy, const float* m, std::size_t n,
                                                  double* acc) {
  grad_sums_impl<8>(x, dy, m, n, acc);
}
COHORT_TARGET_AVX2 inline void grad_sums_avx2(const float* x, const float* dy, const float* m, std::size_t n,
                                              double* acc) {
  grad_sums_impl<4>(x, dy, m, n, acc);
}
/// Doubles per vector of the float path for an instruction set.
inline std::size_t bn_lanes(Isa isa) noexcept { return isa == Isa::avx512 ? 8 : 4; }
inline void moments(Isa isa, const float* p, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    moments_avx512(p, n, acc);
  else if (isa == Isa::avx2)
    moments_avx2(p, n, acc);
  else
    moments_impl<4>(p, n, acc);
}
inline void grad_sums(Isa isa, const float* x, const float* dy, const float* m, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    grad_sums_avx512(x, dy, m, n, acc);
  else if (isa == Isa::avx2)
    grad_sums_avx2(x, dy, m, n, acc);
  else
    grad_sums_impl<4>(x, dy, m, n, acc);
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
    HostBuffer<double> mean, var, invstd; // (C): batch statistics, or running ones in eval mode
    std::size_t count = 0;                // values per channel in the last training batch
    void reserve(std::size_t) {
      mean.resize(G::channels);
      var.resize(G::channels);
      invstd.resize(G::channels);
    }
  };

  /// A following ReLU can be applied inside the kernels (the executor then skips it); float only
  /// (double runs the gradient checks, which compare against the unfused layers).
  template <class T>
  static constexpr bool fuses_relu = std::is_same_v<T, float>;

  /// `relu`: write max(y, 0) (a fused ReLU).
  template <class G, class T>
  static void forward_train(CpuContext& ctx, const T* x, const T* gamma, const T* beta, T* y, std::size_t batch,
                            float eps, workspace<G, T>& ws, bool relu = false) {
    ws.reserve(batch);
    const std::size_t m = batch * G::plane;
    if (m < 2)
      throw ValueError(cohort::detail::concat("BatchNorm2d: training needs more than 1 value per channel, found ", m,
                                              " (batch ", batch, " x plane ", G::plane, ")"));
    ws.count = m;
    const Isa isa = cpu::active_isa();
    ctx.threads().parallel_for(G::channels, 1, [&, isa](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        double mean, var;
        if constexpr (std::is_same_v<T, float>) {
          // One pass: sum and sum of squares in double (no cancellation worth the name for float data).
          double acc[32] = {};
          for (std::size_t n = 0; n < batch; ++n)
            cpu::detail::moments(isa, x + n * G::size + c * G::plane, G::plane, acc);
          double sum, sq;
          cpu::detail::lane_totals(acc, cpu::detail::bn_lanes(isa), sum, sq);
          mean = sum / double(m);
          var = std::max(sq / double(m) - mean * mean, 0.0);
        } else {
          cpu::detail::LaneSums sum, sq;
          for (std::size_t n = 0; n < batch; ++n) sum.add(x + n * G::size + c * G::plane, G::plane);
          mean = sum.total() / double(m);
          for (std::size_t n = 0; n < batch; ++n)
            sq.add_squared_deviation(x + n * G::size + c * G::plane, G::plane, mean);
          var = sq.total() / double(m);
        }
        ws.mean[c] = mean;
        ws.var[c] = var;
        ws.invstd[c] = 1.0 / std::sqrt(var + double(eps));
        normalize_channel<G>(x, y, batch, c, mean, ws.invstd[c], gamma[c], beta[c], relu);
      }
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
  static void forward_eval(CpuContext& ctx, const T* x, const T* gamma, const T* beta, const S* running_mean,
                           const S* running_var, T* y, std::size_t batch, float eps, workspace<G, T>& ws,
                           bool relu = false) {
    ws.reserve(batch);
    ctx.threads().parallel_for(G::channels, 1, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        ws.mean[c] = double(running_mean[c]);
        ws.invstd[c] = 1.0 / std::sqrt(double(running_var[c]) + double(eps));
        normalize_channel<G>(x, y, batch, c, ws.mean[c], ws.invstd[c], gamma[c], beta[c], relu);
      }
    });
  }

  /// Uses the statistics the forward pass saved (batch ones in training, running ones in eval).
  /// `relu_y`: the output of a fused ReLU (dy is then that ReLU's output gradient).
  template <class G, class T>
  static void backward(CpuContext& ctx, bool training, const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                       T* dbeta, std::size_t batch, bool accumulate, workspace<G, T>& ws, const T* relu_y = nullptr) {
    const double m = double(batch * G::plane);
    const Isa isa = cpu::active_isa();
    ctx.threads().parallel_for(G::channels, 1, [&, isa](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        const double mean = ws.mean[c], invstd = ws.invstd[c];
        double sum_dy, sum_dy_xhat;
        if constexpr (std::is_same_v<T, float>) {
          double acc[32] = {};
          for (std::size_t n = 0; n < batch; ++n) {
            const std::size_t at = n * G::size + c * G::plane;
            cpu::detail::grad_sums(isa, x + at, dy + at, relu_y ? relu_y + at : nullptr, G::plane, acc);
          }
          double sum_dy_x;
          cpu::detail::lane_totals(acc, cpu::detail::bn_lanes(isa), sum_dy, sum_dy_x);
          sum_dy_xhat = (sum_dy_x - mean * sum_dy) * invstd;
        } else {
          // (ReLU fusion is float-only: fuses_relu<T> below.)
          cpu::detail::LaneSums lanes_dy, lanes_dy_xhat;
          for (std::size_t n = 0; n < batch; ++n)
            cpu::detail::LaneSums::add_grad(x + n * G::size + c * G::plane, dy + n * G::size + c * G::plane, G::plane,
                                            mean, invstd, lanes_dy, lanes_dy_xhat);
          sum_dy = lanes_dy.total();
          sum_dy_xhat = lanes_dy_xhat.total();
        }
        dgamma[c] = T(accumulate ? double(dgamma[c]) + sum_dy_xhat : sum_dy_xhat);
        dbeta[c] = T(accumulate ? double(dbeta[c]) + sum_dy : sum_dy);
        if (!dx) continue;
        if constexpr (std::is_same_v<T, float>) {
          // dx = (dy - mean(dy) - (x - mean) * k) * invstd * gamma, in float as PyTorch's CPU kernel.
          const float scale = float(invstd * double(gamma[c]));
          const float mean_dy = training ? float(sum_dy / m) : 0.f;
          const float k = training ? float(sum_dy_xhat / m * invstd) : 0.f;
          const float mu = float(mean);
          for (std::size_t n = 0; n < batch; ++n) {
            const std::size_t at = n * G::size + c * G::plane;
            const float* __restrict xp = x + at;
            const float* __restrict gp = dy + at;
            const float* __restrict mp = relu_y ? relu_y + at : nullptr;
            float* __restrict out = dx + at;
            if (mp)
              for (std::size_t i = 0; i < G::plane; ++i)
                out[i] = ((mp[i] > 0.f ? gp[i] : 0.f) - mean_dy - (xp[i] - mu) * k) * scale;
            else
              for (std::size_t i = 0; i < G::plane; ++i) out[i] = (gp[i] - mean_dy - (xp[i] - mu) * k) * scale;
          }
        } else {
          const double g = double(gamma[c]) * invstd;
          for (std::size_t n = 0; n < batch; ++n) {
            const T* __restrict xp = x + n * G::size + c * G::plane;
            const T* __restrict gp = dy + n * G::size + c * G::plane;
            T* __restrict out = dx + n * G::size + c * G::plane;
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
      }
    });
  }

 private:
  template <class G, class T>
  static void normalize_channel(const T* x, T* y, std::size_t batch, std::size_t c, double mean, double invstd, T gamma,
                                T beta, bool relu) {
    // y = x * scale + shift, with scale and shift folded per channel (as PyTorch's CPU kernel).
    using A = accumulator_t<T>;
    const A scale = A(invstd * double(gamma));
    const A shift = A(double(beta) - mean * invstd * double(gamma));
    for (std::size_t n = 0; n < batch; ++n) {
      const T* __restrict p = x + n * G::size + c * G::plane;
      T* __restrict q = y + n * G::size + c * G::plane;
      if (relu)
        for (std::size_t i = 0; i < G::plane; ++i) {
          const T v = T(A(p[i]) * scale + shift);
          q[i] = v > T(0) ? v : T(0); // exactly the ReLU layer's rule
        }
      else
        for (std::size_t i = 0; i < G::plane; ++i) q[i] = T(A(p[i]) * scale + shift);
    }
  }
};

} // namespace cohort
