#pragma once
/// \file
/// dW and db of the stride-1 direct path (backend/cpu/conv2d.hpp): on bf16 dot products, by
/// Winograd, by the tiled float kernel, or per channel for one-channel inputs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d_amx.hpp"
#include "cohort/backend/cpu/conv2d_avx512_bf16.hpp"
#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/conv2d_dy.hpp"
#include "cohort/backend/cpu/conv2d_strided.hpp"
#include "cohort/backend/cpu/conv2d_winograd.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/tap_range.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"

#include "cohort/backend/cpu/conv2d_path_common.hpp"

namespace cohort::cpu::conv2d_paths {

struct WeightGradPath : Common {
 protected:
  /// dW and db on bf16 dot products (amx_conv::GradShape's blocks, on AMX tiles or AVX512-BF16
  /// vectors) when T is bfloat16 and cpu::bf16_dot_engine() has an engine; returns false
  /// (nothing done) otherwise. The batch is cut into at most 4 chunks of
  /// consecutive samples, fixed by the batch size, each summed onto its own partial dW; the
  /// partials and the per-sample bias sums are then added in order: the result does not depend on
  /// the thread count.
  template <class G, class T, class Source>
  static bool bf16_weight_grad(CpuContext& ctx, const T* x, const Source& dy, float* dw, float* db, std::size_t batch,
                               bool accumulate) {
    if constexpr (bf16_dot_path<G, T>) {
      const cpu::Bf16Dot engine = bf16_engine_for<G>();
      if (engine == cpu::Bf16Dot::none) return false;
      using V = cpu::direct::Wide<G>;
      using S = cpu::amx_conv::GradShape<G>;
      ThreadPool& pool = ctx.threads();
      const std::size_t chunks = std::clamp<std::size_t>(batch / 32, 1, 4);
      const std::size_t per_chunk = (batch + chunks - 1) / chunks;
      // Transients of the calling thread, as 32-bit words (the pool's threads see them through
      // pointers): transposed inputs, bf16 dY rows (two per word), partial dW, per-sample db.
      auto* xtp =
          reinterpret_cast<std::uint32_t*>(cpu::detail::transient(cpu::detail::Transient::input, batch * S::x_size));
      auto* dyb = reinterpret_cast<bfloat16*>(
          cpu::detail::transient(cpu::detail::Transient::output, (batch * S::dy_size + 1) / 2));
      float* parts = cpu::detail::transient(cpu::detail::Transient::partials, chunks * S::part_size);
      float* db_n = cpu::detail::transient(cpu::detail::Transient::bias_sums, batch * G::out_channels);
      pool.parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
        float* planes = cpu::detail::conv_scratch<float>(V::cin * V::plane + V::positions).data();
        float* row = planes + V::cin * V::plane;
        for (std::size_t n = lo; n < hi; ++n) {
          cpu::direct::pad_sample<G>(sample(x, n, G::in_size), planes);
          cpu::amx_conv::transposed_pairs<G>(planes, xtp + n * S::x_size);
          bfloat16* rows = dyb + n * S::dy_size;
          for (std::size_t o = 0; o < G::out_channels; ++o) {
            dy.wide_channel(n, o, row);
            db_n[n * G::out_channels + o] = cpu::amx_conv::dy_row<G>(row, rows + o * S::k_positions);
          }
          std::fill(rows + G::out_channels * S::k_positions, rows + S::dy_size, bfloat16{});
        }
      });
      pool.parallel_for(chunks * S::blocks, 1, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t c = lo / S::blocks; c * S::blocks < hi; ++c) {
          const std::size_t j0 = std::max(lo, c * S::blocks) - c * S::blocks;
          const std::size_t j1 = std::min(hi, (c + 1) * S::blocks) - c * S::blocks;
          const std::size_t first = c * per_chunk, count = std::min(batch, first + per_chunk) - first;
          if (engine == cpu::Bf16Dot::amx)
            cpu::amx_conv::weight_grad_blocks<G>(dyb + first * S::dy_size, xtp + first * S::x_size, count, j0, j1,
                                                 parts + c * S::part_size);
          else
            cpu::avx512_bf16_conv::weight_grad_blocks<G>(dyb + first * S::dy_size, xtp + first * S::x_size, count, j0,
                                                         j1, parts + c * S::part_size);
        }
      });
      constexpr std::size_t taps = V::taps;
      for (std::size_t o = 0; o < G::out_channels; ++o) {
        for (std::size_t ci = 0; ci < G::in_channels; ++ci)
          for (std::size_t t = 0; t < taps; ++t) {
            const std::size_t at = (t * S::rows + o) * S::cols + ci;
            float s = parts[at];
            for (std::size_t c = 1; c < chunks; ++c) s += parts[c * S::part_size + at];
            float& out = dw[(o * G::in_channels + ci) * taps + t];
            out = accumulate ? out + s : s;
          }
        if (!db) continue; // (dy_row converted the rows anyway; its sums are free)
        float s = db_n[o];
        for (std::size_t n = 1; n < batch; ++n) s += db_n[n * G::out_channels + o];
        db[o] = accumulate ? db[o] + s : s;
      }
      return true;
    } else {
      (void)ctx, (void)x, (void)dy, (void)dw, (void)db, (void)batch, (void)accumulate;
      return false;
    }
  }

  /// dW and db by Winograd F(K x K, M x M) when conv_algorithm<G>() asks for tiles of M
  /// (conv2d_winograd.hpp): groups of samples transformed (split by sample), then each position's
  /// GEMM accumulated over the groups in order (split by position), then the output transform
  /// (split by channel). Groups depend on the batch size only: so does the result.
  template <class G, class T, class Source>
  static bool winograd_weight_grad(CpuContext& ctx, Isa isa, const T* x, const Source& dy, float* dw, float* db,
                                   std::size_t batch, bool accumulate) {
    if constexpr (cpu::winograd::applicable<G>) {
      switch (cpu::conv_algorithm<G>(isa)) { // (only the algorithms compiled for G: conv2d_path_direct.hpp)
      case cpu::ConvAlgorithm::winograd_f2:
        if constexpr (cpu::winograd::compiled<G, cpu::ConvAlgorithm::winograd_f2>) {
          winograd_weight_grad<G, 2>(ctx, isa, x, dy, dw, db, batch, accumulate);
          return true;
        }
        break;
      case cpu::ConvAlgorithm::winograd_f4:
        if constexpr (cpu::winograd::compiled<G, cpu::ConvAlgorithm::winograd_f4>) {
          winograd_weight_grad<G, 4>(ctx, isa, x, dy, dw, db, batch, accumulate);
          return true;
        }
        break;
      default:
        break;
      }
    }
    (void)ctx, (void)isa, (void)x, (void)dy, (void)dw, (void)db, (void)batch, (void)accumulate;
    return false;
  }
  template <class G, std::size_t M, class T, class Source>
  static void winograd_weight_grad(CpuContext& ctx, Isa isa, const T* x, const Source& dy, float* dw, float* db,
                                   std::size_t batch, bool accumulate) {
    using P = cpu::winograd::GradPlan<G, M>;
    using V = cpu::direct::Wide<G>;
    ThreadPool& pool = ctx.threads();
    const std::size_t group = std::min(batch, P::group);
    // Transients of the calling thread: Xp and Dh of one group, the accumulators, per-sample db.
    float* xp = cpu::detail::transient(cpu::detail::Transient::input, P::transformed(group));
    float* dh = xp + P::positions * group * P::tiles * P::cin;
    float* acc = cpu::detail::transient(cpu::detail::Transient::output, P::acc_size);
    float* db_n = cpu::detail::transient(cpu::detail::Transient::bias_sums, batch * P::dy_channels);
    for (std::size_t n0 = 0; n0 < batch; n0 += group) {
      const std::size_t count = std::min(group, batch - n0), rows = count * P::tiles;
      pool.parallel_for(count, 1, [&, isa, n0, rows](std::size_t lo, std::size_t hi) {
        float* xt = cpu::detail::conv_scratch<float>(P::sample_scratch).data();
        float* xh = xt + V::cin * V::plane;
        float* dyt = xh + P::in_size;
        for (std::size_t i = lo; i < hi; ++i) {
          const std::size_t n = n0 + i;
          cpu::direct::pad_sample<G>(sample(x, n, G::in_size), xt);
          dy.transposed(n, dyt, P::dy_channels);
          if (db)
            cpu::direct::bias_grad(isa, dyt, G::out_h * G::out_w, P::dy_channels, P::dy_channels,
                                   db_n + n * P::dy_channels, false);
          cpu::winograd::grad_sample_dispatch<G, M>(isa, xt, dyt, xh, xp, dh, i * P::tiles, rows);
        }
      });
      pool.parallel_for(P::positions, 1, [&, isa, n0, rows](std::size_t p0, std::size_t p1) {
        cpu::winograd::grad_multiply_dispatch<G, M>(isa, xp, dh, acc, rows, p0, p1, n0 == 0);
      });
    }
    for (std::size_t o = 0; db && o < G::out_channels; ++o) {
      float s = db_n[o];
      for (std::size_t n = 1; n < batch; ++n) s += db_n[n * P::dy_channels + o];
      db[o] = accumulate ? db[o] + s : s;
    }
    pool.parallel_for(G::out_channels, 1, [&](std::size_t k0, std::size_t k1) {
      cpu::winograd::grad_output<G, M>(acc, dw, accumulate, k0, k1);
    });
  }

  /// dW and db through (patch x channel) tiles over dY transposed to (position, channel).
  template <class G, class T, class Source>
  static void tiled_weight_grad(CpuContext& ctx, Isa isa, const T* x, const Source& dy, float* dw, float* db,
                                std::size_t batch, bool accumulate) {
    using V = cpu::direct::plan_t<G>;
    ThreadPool& pool = ctx.threads();
    const auto shape = cpu::direct::weight_grad_shape<G>(isa);
    constexpr std::size_t valid = G::out_h * G::out_w, patch = V::cin * V::taps;
    // Transients of the calling thread (the pool's threads only see them through pointers).
    float* padded = cpu::detail::transient(cpu::detail::Transient::input, batch * V::cin * V::channel_stride);
    float* dyt = cpu::detail::transient(cpu::detail::Transient::output, batch * valid * shape.padded_cout);
    float* db_n =
        cpu::detail::transient(cpu::detail::Transient::bias_sums, batch * shape.padded_cout); // per-sample bias sums
    // The padded input (rebuilt: cheaper in memory than keeping it from the forward pass) and dY
    // transposed to (sample, position, channel): the dW kernel vectorises over channels. Each
    // sample's bias sum is taken while its dY is in cache (one lane per channel, positions in
    // order), then the samples are summed in order below.
    pool.parallel_for(batch, 1, [&, isa](std::size_t lo, std::size_t hi) {
      for (std::size_t n = lo; n < hi; ++n) {
        cpu::direct::pad_input<G>(sample(x, n, G::in_size), padded + n * V::cin * V::channel_stride);
        float* dyt_n = dyt + n * valid * shape.padded_cout;
        dy.transposed(n, dyt_n, shape.padded_cout);
        if (db)
          cpu::direct::bias_grad(isa, dyt_n, valid, shape.padded_cout, shape.padded_cout, db_n + n * shape.padded_cout,
                                 false);
      }
    });
    for (std::size_t o = 0; db && o < V::cout; ++o) {
      float s = db_n[o];
      for (std::size_t n = 1; n < batch; ++n) s += db_n[n * shape.padded_cout + o];
      db[o] = accumulate ? db[o] + s : s;
    }
    // dW^T by (input channel, kernel rows) x output-channel tiles over blocks of samples, in
    // order. A block has enough positions (>= 384) that a tile's accumulators, loaded and stored
    // once per block, cost little; consecutive tiles share one slice of dY, hot in cache.
    // Small layers also split the batch into chunks with partial sums of their own: threads then
    // read different samples instead of all reading every sample (memory-bound with two threads).
    // The chunks depend on the batch size only, and are summed in order, so the result does not
    // depend on the thread count.
    const std::size_t block = std::min(batch, std::max<std::size_t>(1, (384 + valid - 1) / valid));
    const std::size_t part = patch * shape.padded_cout;
    const std::size_t want = std::min({std::size_t(8), std::max<std::size_t>(1, batch / 16),
                                       std::max<std::size_t>(1, (std::size_t(1) << 16) / part)});
    const std::size_t per_chunk = (batch + want - 1) / want, chunks = (batch + per_chunk - 1) / per_chunk;
    float* dw_t = cpu::detail::transient(cpu::detail::Transient::partials, chunks * part);
    const std::size_t tiles = shape.tiles;
    pool.parallel_for(chunks * tiles, 1, [&, isa](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo / tiles; c * tiles < hi; ++c) {
        const std::size_t t0 = std::max(lo, c * tiles) - c * tiles, t1 = std::min(hi, (c + 1) * tiles) - c * tiles;
        const std::size_t first = c * per_chunk, end = std::min(batch, first + per_chunk);
        for (std::size_t n0 = first; n0 < end; n0 += block)
          for (std::size_t t = t0; t < t1; ++t)
            cpu::direct::weight_grad_tile_dispatch<G>(isa, padded + n0 * V::cin * V::channel_stride,
                                                      dyt + n0 * valid * shape.padded_cout, std::min(block, end - n0),
                                                      t, dw_t + c * part, n0 == first);
      }
    });
    for (std::size_t o = 0; o < V::cout; ++o)
      for (std::size_t k = 0; k < patch; ++k) {
        const std::size_t at = k * shape.padded_cout + o;
        float s = dw_t[at];
        for (std::size_t c = 1; c < chunks; ++c) s += dw_t[c * part + at];
        dw[o * patch + k] = accumulate ? dw[o * patch + k] + s : s;
      }
  }

  /// dW and db of a one-channel, small-kernel convolution: per output channel (split between
  /// threads), position-vectorised over all samples; lanes summed in order at the end.
  template <class G, class T, class Source>
  static void channel_weight_grad(CpuContext& ctx, Isa isa, const T* x, const Source& dy, float* dw, float* db,
                                  std::size_t batch, bool accumulate) {
    using V = cpu::direct::Wide<G>;
    ThreadPool& pool = ctx.threads();
    float* padded = cpu::detail::transient(cpu::detail::Transient::input, batch * V::plane);
    pool.parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t n = lo; n < hi; ++n) cpu::direct::pad_sample<G>(sample(x, n, G::in_size), padded + n * V::plane);
    });
    constexpr std::size_t block = 16, taps = V::taps; // samples per kernel call
    const std::size_t lanes = std::size_t(cpu::direct::width(isa));
    pool.parallel_for(V::cout, 1, [&, isa, lanes](std::size_t lo, std::size_t hi) {
      float* rows = cpu::detail::conv_scratch<float>(block * V::positions + (taps + 1) * 16).data();
      float* acc = rows + block * V::positions; // (taps + 1) x lanes partial sums
      for (std::size_t o = lo; o < hi; ++o) {
        std::fill(acc, acc + (taps + 1) * lanes, 0.f);
        for (std::size_t n0 = 0; n0 < batch; n0 += block) {
          const std::size_t nb = std::min(block, batch - n0);
          for (std::size_t i = 0; i < nb; ++i) dy.wide_channel(n0 + i, o, rows + i * V::positions);
          cpu::direct::weight_grad_channel_dispatch<G>(isa, padded + n0 * V::plane, rows, nb, acc);
        }
        const auto lane_sum = [&](std::size_t k) {
          float s = 0.f;
          for (std::size_t l = 0; l < lanes; ++l) s += acc[k * lanes + l];
          return s;
        };
        for (std::size_t k = 0; k < taps; ++k)
          dw[o * taps + k] = accumulate ? dw[o * taps + k] + lane_sum(k) : lane_sum(k);
        // (The kernel sums dY alongside the taps, in the same pass: without a bias it is dropped.)
        if (db) db[o] = accumulate ? db[o] + lane_sum(taps) : lane_sum(taps);
      }
    });
  }
};

} // namespace cohort::cpu::conv2d_paths
