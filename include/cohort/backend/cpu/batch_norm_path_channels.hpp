#pragma once
/// \file
/// What CPU BatchNorm's paths share (backend/cpu/batch_norm.hpp dispatches between them): the
/// workspace, the channel split between threads, batch and running statistics, the gradient sums'
/// totals and dX's coefficients, and the (C, plane) normalisation with its 16-bit edges.

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

#include "cohort/backend/cpu/batch_norm_sums.hpp"

namespace cohort::cpu::batch_norm_paths {

struct Channels {
  /// float and the 16-bit storage types take the vectorised float path (the latter converted
  /// plane by plane); double (gradient checks) the reference path.
  template <class T>
  static constexpr bool float_path = std::is_same_v<T, float> || cpu::is_half_type<T>;

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

  /// Splits the channels between the threads; each task visits its channels sample by sample,
  /// so it reads long contiguous runs (one per sample) instead of one short plane per sample and
  /// channel. Every channel is summed in the same order whatever the split.
  template <class G, class Fn>
  static void each_channel_range(CpuContext& ctx, Fn&& fn) {
    ctx.threads().parallel_for(G::channels, 1, std::forward<Fn>(fn));
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

} // namespace cohort::cpu::batch_norm_paths
