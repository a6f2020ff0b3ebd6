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
        double sum = 0;
        for (std::size_t n = 0; n < batch; ++n) {
          const T* p = x + n * G::size + c * G::plane;
          for (std::size_t i = 0; i < G::plane; ++i) sum += double(p[i]);
        }
        const double mean = sum / double(m);
        double sq = 0;
        for (std::size_t n = 0; n < batch; ++n) {
          const T* p = x + n * G::size + c * G::plane;
          for (std::size_t i = 0; i < G::plane; ++i) {
            const double d = double(p[i]) - mean;
            sq += d * d;
          }
        }
        const double var = sq / double(m);
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
        double sum_dy = 0, sum_dy_xhat = 0;
        for (std::size_t n = 0; n < batch; ++n) {
          const T* xp = x + n * G::size + c * G::plane;
          const T* gp = dy + n * G::size + c * G::plane;
          for (std::size_t i = 0; i < G::plane; ++i) {
            sum_dy += double(gp[i]);
            sum_dy_xhat += double(gp[i]) * (double(xp[i]) - mean) * invstd;
          }
        }
        dgamma[c] = T(accumulate ? double(dgamma[c]) + sum_dy_xhat : sum_dy_xhat);
        dbeta[c] = T(accumulate ? double(dbeta[c]) + sum_dy : sum_dy);
        if (!dx) continue;
        const double g = double(gamma[c]) * invstd;
        for (std::size_t n = 0; n < batch; ++n) {
          const T* xp = x + n * G::size + c * G::plane;
          const T* gp = dy + n * G::size + c * G::plane;
          T* out = dx + n * G::size + c * G::plane;
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
      const T* p = x + n * G::size + c * G::plane;
      T* q = y + n * G::size + c * G::plane;
      for (std::size_t i = 0; i < G::plane; ++i) q[i] = T(A(p[i]) * scale + shift);
    }
  }
};

} // namespace cohort
