#pragma once
/// \file
/// GroupNorm on the CPU, torch's algorithm (aten/src/ATen/native/cpu/group_norm_kernel.cpp):
/// per sample and group, the mean and the biased variance of its C / G channels' planes (which
/// lie next to each other in memory), in double, two passes; then per channel one scale and
/// shift, y = x * scale + shift. Backward sums dy and dy * x per sample and channel (double),
/// combines them per group into the input gradient's three coefficients, and adds the
/// per-channel sums over samples, in sample order, into dgamma and dbeta: the same for any
/// thread count. 16-bit storage is read as float and rounded once on the way out.

#include <cmath>
#include <cstddef>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

template <>
struct ops::GroupNormKernels<Cpu> {
  /// The statistics of the last forward pass (per sample and group) and backward's sums.
  template <class G, class T>
  struct workspace {
    HostBuffer<double> mean, rstd; // (batch, groups)
    HostBuffer<double> sums;       // (batch, channels, 2): sum dy, sum dy * x
    void reserve(std::size_t) noexcept {}
  };

  /// y = (x - mean) / sqrt(var + eps) * gamma + beta, statistics per sample and group.
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const accumulator_t<T>* gamma, const accumulator_t<T>* beta, T* y,
                      std::size_t batch, float eps, workspace<G, T>& ws) {
    using A = accumulator_t<T>;
    constexpr std::size_t per_group = G::channels_per_group * G::plane;
    ws.mean.resize(batch * G::groups);
    ws.rstd.resize(batch * G::groups);
    ctx.threads().parallel_for(batch * G::groups, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t s = lo; s < hi; ++s) {
        const T* xs = x + s * per_group; // (n, g) is contiguous: channels g * C/G .. (g + 1) * C/G
        double sum = 0;
        for (std::size_t i = 0; i < per_group; ++i) sum += double(A(xs[i]));
        const double mean = sum / double(per_group);
        double sq = 0;
        for (std::size_t i = 0; i < per_group; ++i) {
          const double d = double(A(xs[i])) - mean;
          sq += d * d;
        }
        const double rstd = 1 / std::sqrt(sq / double(per_group) + double(eps));
        ws.mean[s] = mean;
        ws.rstd[s] = rstd;
        const std::size_t c0 = s % G::groups * G::channels_per_group;
        for (std::size_t k = 0; k < G::channels_per_group; ++k) {
          const std::size_t c = c0 + k;
          const A scale = A(rstd * double(gamma[c])), shift = A(double(beta[c]) - mean * rstd * double(gamma[c]));
          const T* xp = xs + k * G::plane;
          T* yp = y + s * per_group + k * G::plane;
          for (std::size_t i = 0; i < G::plane; ++i) yp[i] = T(A(xp[i]) * scale + shift);
        }
      }
    });
  }

  template <class G, class T>
  static void backward(CpuContext& ctx, const GroupNormBackwardArgs<T>& a, workspace<G, T>& ws) {
    using A = accumulator_t<T>;
    constexpr std::size_t cpg = G::channels_per_group, per_group = cpg * G::plane;
    const std::size_t batch = a.batch;
    ws.sums.resize(batch * G::channels * 2);
    ctx.threads().parallel_for(batch * G::groups, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t s = lo; s < hi; ++s) {
        const std::size_t c0 = s % G::groups * cpg;
        double db_g = 0, ds_g = 0; // sum over the group's channels of gamma * (sum dy), gamma * (sum dy * x)
        for (std::size_t k = 0; k < cpg; ++k) {
          const T* xp = a.x + s * per_group + k * G::plane;
          const T* dyp = a.dy + s * per_group + k * G::plane;
          double db = 0, ds = 0;
          for (std::size_t i = 0; i < G::plane; ++i) {
            const double d = double(A(dyp[i]));
            db += d;
            ds += d * double(A(xp[i]));
          }
          double* out = ws.sums.data() + (s / G::groups * G::channels + c0 + k) * 2;
          out[0] = db;
          out[1] = ds;
          db_g += double(a.gamma[c0 + k]) * db;
          ds_g += double(a.gamma[c0 + k]) * ds;
        }
        if (!a.dx) continue;
        const double mean = ws.mean[s], rstd = ws.rstd[s], m = double(per_group);
        const double c2 = (db_g * mean - ds_g) * rstd * rstd * rstd / m;
        const double c3 = -c2 * mean - db_g * rstd / m;
        for (std::size_t k = 0; k < cpg; ++k) {
          const A c1 = A(rstd * double(a.gamma[c0 + k]));
          const T* xp = a.x + s * per_group + k * G::plane;
          const T* dyp = a.dy + s * per_group + k * G::plane;
          T* dxp = a.dx + s * per_group + k * G::plane;
          for (std::size_t i = 0; i < G::plane; ++i) dxp[i] = T(c1 * A(dyp[i]) + A(c2) * A(xp[i]) + A(c3));
        }
      }
    });
    // dgamma[c] = sum_n (sum dy * x - mean * sum dy) * rstd, dbeta[c] = sum_n sum dy; n in order.
    ctx.threads().parallel_for(G::channels, 8, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        double dg = 0, dbeta = 0;
        for (std::size_t n = 0; n < batch; ++n) {
          const double* in = ws.sums.data() + (n * G::channels + c) * 2;
          const std::size_t s = n * G::groups + c / cpg;
          dg += (in[1] - ws.mean[s] * in[0]) * ws.rstd[s];
          dbeta += in[0];
        }
        a.dgamma[c] = a.accumulate ? A(double(a.dgamma[c]) + dg) : A(dg);
        a.dbeta[c] = a.accumulate ? A(double(a.dbeta[c]) + dbeta) : A(dbeta);
      }
    });
  }
};

} // namespace cohort
