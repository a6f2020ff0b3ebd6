#pragma once
/// \file
/// BatchNorm2d and BatchNorm1d on the CPU. Per-channel sums are accumulated in double, as
/// PyTorch's CPU kernel does, so statistics match it to float rounding.
///
/// BatchNorm1d's (N, Features) batches are geometries of plane 1: a channel is a column, not a
/// plane, so they take a path of their own (features_*) that walks the rows and vectorises
/// across the channels.
///
/// This file is the dispatch; the paths are structs of static functions, each deriving from the
/// one it builds on: batch_norm_sums.hpp (the vector kernels), batch_norm_path_channels.hpp
/// ((C, plane) samples: statistics, normalisation, gradient sums), batch_norm_path_features.hpp
/// (BatchNorm1d's rows).

#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu/batch_norm_path_features.hpp"
#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

template <>
struct ops::BatchNormKernels<Cpu> : cpu::batch_norm_paths::Features {

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
                            T* y, std::size_t batch, float eps, workspace<G, T>& ws, bool relu = false);

  template <class G, class T, class S>
  static void update_running(CpuContext&, S* running_mean, S* running_var, std::size_t, float momentum,
                             workspace<G, T>& ws);

  template <class G, class T, class S>
  static void forward_eval(CpuContext& ctx, const BatchNormEvalArgs<T, S>& a, workspace<G, T>& ws);

  /// Uses the statistics the forward pass saved (batch ones in training, running ones in eval).
  template <class G, class T>
  static void backward(CpuContext& ctx, const BatchNormBackwardArgs<T>& a, workspace<G, T>& ws);

  /// BatchNorm2d -> ReLU -> MaxPool2d<2> (when fuses_relu_pool), training mode: writes the pool's
  /// output and keeps each window's argmax for backward_relu_pool.
  template <class G, class PG, class T>
  static void forward_train_relu_pool(CpuContext& ctx, const T* x, const float* gamma, const float* beta, T* pooled,
                                      std::size_t batch, float eps, workspace<G, T>& ws);
  /// The same in evaluation mode (running statistics).
  /// (`a.y` is the pool's output; `a.relu` is implied.)
  template <class G, class PG, class T, class S>
  static void forward_eval_relu_pool(CpuContext& ctx, const BatchNormEvalArgs<T, S>& a, workspace<G, T>& ws);

  /// Backward of the fused three: `dpool` is the gradient of the pool's output, `pooled` that
  /// output. The ReLU's and the pool's gradient is dpool at each window's argmax where the
  /// pooled value is > 0, 0 elsewhere. Each plane's gradient is scattered into a dense scratch
  /// plane (in L1) and then summed and applied by backward()'s own vectorised loops, so the
  /// result is bitwise the unfused one. (Summing and applying at the argmax positions only, with
  /// a branch on the data per cell, was 1.4-1.6x slower: model B's first BatchNorm backward took
  /// 1.36 ms of an 11 ms step, 1.0 ms now. Each plane is unpooled twice, for the sums and for dX:
  /// cheaper than keeping a batch of dense planes.)
  template <class G, class PG, class T>
  static void backward_relu_pool(CpuContext& ctx, const BatchNormReluPoolBackwardArgs<T>& a, workspace<G, T>& ws);
};

// The entry points, defined out of the class and not inline: a translation unit built against
// the compiled kernel library (COHORT_COMPILED_KERNELS) declares the instantiations it finds
// there `extern template` and instantiates none of this (backend/cpu/compiled_instances.hpp).

template <class G, class T>
void ops::BatchNormKernels<Cpu>::forward_train(CpuContext& ctx, const T* x, const accumulator_t<T>* gamma,
                                               const accumulator_t<T>* beta, T* y, std::size_t batch, float eps,
                                               workspace<G, T>& ws, bool relu) {
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
void ops::BatchNormKernels<Cpu>::update_running(CpuContext&, S* running_mean, S* running_var, std::size_t,
                                                float momentum, workspace<G, T>& ws) {
  const double mom = double(momentum);
  const double m = double(ws.count);
  for (std::size_t c = 0; c < G::channels; ++c) {
    running_mean[c] = S(mom * ws.mean[c] + (1.0 - mom) * double(running_mean[c]));
    running_var[c] = S(mom * (ws.var[c] * m / (m - 1.0)) + (1.0 - mom) * double(running_var[c]));
  }
}

template <class G, class T, class S>
void ops::BatchNormKernels<Cpu>::forward_eval(CpuContext& ctx, const BatchNormEvalArgs<T, S>& a, workspace<G, T>& ws) {
  const T* x = a.x;
  const accumulator_t<T>*gamma = a.gamma, *beta = a.beta;
  T* y = a.y;
  const std::size_t batch = a.batch;
  const bool relu = a.relu;
  ws.reserve(batch);
  running_statistics<G>(a.running_mean, a.running_var, a.eps, ws);
  if constexpr (G::plane == 1) return features_normalize<G>(ctx, x, gamma, beta, y, batch, ws, relu);
  each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t c = c0; c < c1; ++c)
        normalize_plane<G>(x, y, n, c, ws.mean[c], ws.invstd[c], gamma[c], beta[c], relu);
  });
}

template <class G, class T>
void ops::BatchNormKernels<Cpu>::backward(CpuContext& ctx, const BatchNormBackwardArgs<T>& a, workspace<G, T>& ws) {
  const bool training = a.training, accumulate = a.accumulate;
  const T *x = a.x, *dy = a.dy, *relu_y = a.relu_y;
  const accumulator_t<T>* gamma = a.gamma;
  T* dx = a.dx;
  accumulator_t<T>*dgamma = a.dgamma, *dbeta = a.dbeta;
  const std::size_t batch = a.batch;
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

template <class G, class PG, class T>
void ops::BatchNormKernels<Cpu>::forward_train_relu_pool(CpuContext& ctx, const T* x, const float* gamma,
                                                         const float* beta, T* pooled, std::size_t batch, float eps,
                                                         workspace<G, T>& ws) {
  start_training<G>(batch, ws);
  if (ws.window.size() < batch * PG::out_size) ws.window.resize(batch * PG::out_size);
  each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
    batch_statistics<G>(x, batch, c0, c1, eps, ws);
    normalize_relu_pool<G, PG>(x, pooled, batch, c0, c1, gamma, beta, ws);
  });
}

template <class G, class PG, class T, class S>
void ops::BatchNormKernels<Cpu>::forward_eval_relu_pool(CpuContext& ctx, const BatchNormEvalArgs<T, S>& a,
                                                        workspace<G, T>& ws) {
  ws.reserve(a.batch);
  if (ws.window.size() < a.batch * PG::out_size) ws.window.resize(a.batch * PG::out_size);
  running_statistics<G>(a.running_mean, a.running_var, a.eps, ws);
  each_channel_range<G>(ctx, [&](std::size_t c0, std::size_t c1) {
    normalize_relu_pool<G, PG>(a.x, a.y, a.batch, c0, c1, a.gamma, a.beta, ws);
  });
}

template <class G, class PG, class T>
void ops::BatchNormKernels<Cpu>::backward_relu_pool(CpuContext& ctx, const BatchNormReluPoolBackwardArgs<T>& a,
                                                    workspace<G, T>& ws) {
  const bool training = a.training, accumulate = a.accumulate;
  const T *x = a.x, *dpool = a.dpool, *pooled = a.pooled;
  const float* gamma = a.gamma;
  T* dx = a.dx;
  float *dgamma = a.dgamma, *dbeta = a.dbeta;
  const std::size_t batch = a.batch;
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

} // namespace cohort
