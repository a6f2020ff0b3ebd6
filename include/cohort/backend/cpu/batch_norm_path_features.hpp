#pragma once
/// \file
/// BatchNorm1d's path on the CPU (backend/cpu/batch_norm.hpp): (N, C) rows, vectorised across
/// the channels, statistics, normalisation and backward.

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

#include "cohort/backend/cpu/batch_norm_path_channels.hpp"

namespace cohort::cpu::batch_norm_paths {

struct Features : Channels {
 protected:
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
};

} // namespace cohort::cpu::batch_norm_paths
