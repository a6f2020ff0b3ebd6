#pragma once
/// \file
/// BatchNorm2d on the CPU. Per-channel sums are accumulated in double (two passes: mean, then
/// squared deviations), as PyTorch's CPU kernel does, so statistics match it to float rounding.

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cohort/backend/cpu/context.hpp"
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

  template <class G, class T>
  static void forward_train(CpuContext& ctx, const T* x, const T* gamma, const T* beta, T* y, std::size_t batch,
                            float eps, workspace<G, T>& ws) {
    ws.reserve(batch);
    const std::size_t m = batch * G::plane;
    if (m < 2)
      throw ValueError(cohort::detail::concat("BatchNorm2d: training needs more than 1 value per channel, found ", m,
                                              " (batch ", batch, " x plane ", G::plane, ")"));
    ws.count = m;
    ctx.threads().parallel_for(G::channels, 1, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        cpu::detail::LaneSums sum, sq;
        for (std::size_t n = 0; n < batch; ++n) sum.add(x + n * G::size + c * G::plane, G::plane);
        const double mean = sum.total() / double(m);
        for (std::size_t n = 0; n < batch; ++n)
          sq.add_squared_deviation(x + n * G::size + c * G::plane, G::plane, mean);
        const double var = sq.total() / double(m);
        ws.mean[c] = mean;
        ws.var[c] = var;
        ws.invstd[c] = 1.0 / std::sqrt(var + double(eps));
        normalize_channel<G>(x, y, batch, c, mean, ws.invstd[c], gamma[c], beta[c]);
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
                           const S* running_var, T* y, std::size_t batch, float eps, workspace<G, T>& ws) {
    ws.reserve(batch);
    ctx.threads().parallel_for(G::channels, 1, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        ws.mean[c] = double(running_mean[c]);
        ws.invstd[c] = 1.0 / std::sqrt(double(running_var[c]) + double(eps));
        normalize_channel<G>(x, y, batch, c, ws.mean[c], ws.invstd[c], gamma[c], beta[c]);
      }
    });
  }

  /// Uses the statistics the forward pass saved (batch ones in training, running ones in eval).
  template <class G, class T>
  static void backward(CpuContext& ctx, bool training, const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                       T* dbeta, std::size_t batch, bool accumulate, workspace<G, T>& ws) {
    const double m = double(batch * G::plane);
    ctx.threads().parallel_for(G::channels, 1, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {
        const double mean = ws.mean[c], invstd = ws.invstd[c];
        cpu::detail::LaneSums lanes_dy, lanes_dy_xhat;
        for (std::size_t n = 0; n < batch; ++n)
          cpu::detail::LaneSums::add_grad(x + n * G::size + c * G::plane, dy + n * G::size + c * G::plane, G::plane,
                                          mean, invstd, lanes_dy, lanes_dy_xhat);
        const double sum_dy = lanes_dy.total(), sum_dy_xhat = lanes_dy_xhat.total();
        dgamma[c] = T(accumulate ? double(dgamma[c]) + sum_dy_xhat : sum_dy_xhat);
        dbeta[c] = T(accumulate ? double(dbeta[c]) + sum_dy : sum_dy);
        if (!dx) continue;
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
    });
  }

 private:
  template <class G, class T>
  static void normalize_channel(const T* x, T* y, std::size_t batch, std::size_t c, double mean, double invstd, T gamma,
                                T beta) {
    // y = x * scale + shift, with scale and shift folded per channel (as PyTorch's CPU kernel).
    using A = accumulator_t<T>;
    const A scale = A(invstd * double(gamma));
    const A shift = A(double(beta) - mean * invstd * double(gamma));
    for (std::size_t n = 0; n < batch; ++n) {
      const T* __restrict p = x + n * G::size + c * G::plane;
      T* __restrict q = y + n * G::size + c * G::plane;
      for (std::size_t i = 0; i < G::plane; ++i) q[i] = T(A(p[i]) * scale + shift);
    }
  }
};

} // namespace cohort
