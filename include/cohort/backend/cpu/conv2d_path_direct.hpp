#pragma once
/// \file
/// The direct path (backend/cpu/conv2d.hpp): stride-1 convolutions on wide planes, strided ones on
/// phase planes, float inside (bf16 dot products for bfloat16 where the CPU has them), Winograd
/// where conv_algorithm picks it; forward, dX, and dW through WeightGradPath.

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

#include "cohort/backend/cpu/conv2d_path_weight_grad.hpp"

namespace cohort::cpu::conv2d_paths {

struct DirectPath : WeightGradPath {
 protected:
  // ---- direct path: stride 1, float inside -----------------------------------------------------

  template <class G, class T>
  static void direct_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                             workspace<G, T>& ws, bool relu) {
    using V = cpu::direct::plan_t<G>;
    const Isa isa = cpu::active_isa();
    run_direct<G, G>(
        ctx, isa, w, false, float_bias<G>(isa, b, ws), batch, ws,
        [&](std::size_t n, float* xt) { cpu::direct::pad_input<G>(sample(x, n, G::in_size), xt); },
        [&](std::size_t n, const float* wide) {
          float* out = staging<T>(y + n * G::out_size, G::out_size);
          cpu::direct::unwiden<G>(wide, out, V::cout, relu);
          unstage(isa, out, y + n * G::out_size, G::out_size);
        });
  }

  /// Runs the forward kernel of Gk over the batch with G's weights: Gk = G for the forward pass,
  /// Gk = transposed_geometry<G> with `transpose_rotate` for dX. On bf16 dot products (AMX tiles
  /// or AVX512-BF16 vectors, fp32 sums) for bfloat16 where cpu::bf16_dot_engine() has an engine,
  /// else the float kernel. `pad` and `unpad` as for run_groups.
  template <class G, class Gk, class T, class Pad, class Unpad>
  static void run_direct(CpuContext& ctx, Isa isa, const T* w, bool transpose_rotate, const float* bias,
                         std::size_t batch, workspace<G, T>& ws, Pad&& pad, Unpad&& unpad) {
    if constexpr (bf16_dot_path<Gk, T>) {
      if (const cpu::Bf16Dot engine = bf16_engine_for<Gk>(); engine != cpu::Bf16Dot::none) {
        HostBuffer<bfloat16>& packed = transpose_rotate ? ws.amx_packed_t : ws.amx_packed;
        cpu::amx_conv::pack_weights<G, Gk>(w, packed, transpose_rotate);
        const float* tiles = bias ? cpu::amx_conv::bias_tiles<Gk>(bias, ws.bias_tiles) : nullptr;
        run_groups_bf16<Gk>(ctx, engine, batch, packed.data(), tiles, pad, unpad);
        return;
      }
    }
    if constexpr (cpu::winograd::applicable<Gk>) {
      // Only the algorithms compiled for Gk are referenced (conv_algorithm never returns another).
      switch (cpu::conv_algorithm<Gk>(isa)) {
      case cpu::ConvAlgorithm::winograd_f2:
        if constexpr (cpu::winograd::compiled<Gk, cpu::ConvAlgorithm::winograd_f2>)
          return run_winograd<G, Gk, 2>(ctx, isa, w, transpose_rotate, bias, batch, ws, pad, unpad);
        break;
      case cpu::ConvAlgorithm::winograd_f4:
        if constexpr (cpu::winograd::compiled<Gk, cpu::ConvAlgorithm::winograd_f4>)
          return run_winograd<G, Gk, 4>(ctx, isa, w, transpose_rotate, bias, batch, ws, pad, unpad);
        break;
      default:
        break;
      }
    }
    HostBuffer<float>& packed = transpose_rotate ? ws.packed_t : ws.packed;
    cpu::direct::pack_for<G, Gk>(isa, w, packed, transpose_rotate);
    run_groups<Gk>(ctx, isa, batch, cpu::direct::forward_rows<Gk>(isa), packed.data(), bias, pad, unpad);
  }

  /// run_direct's work by Winograd F(M x M, K x K) (conv2d_winograd.hpp): the weights transformed
  /// once per call, groups of samples split between threads as for the direct kernel.
  template <class G, class Gk, std::size_t M, class T, class Pad, class Unpad>
  static void run_winograd(CpuContext& ctx, Isa isa, const T* w, bool transpose_rotate, const float* bias,
                           std::size_t batch, workspace<G, T>& ws, Pad& pad, Unpad& unpad) {
    using P = cpu::winograd::Plan<Gk, M>;
    HostBuffer<float>& u = transpose_rotate ? ws.winograd_t : ws.winograd;
    cpu::winograd::pack_weights<G, Gk, M>(cpu::direct::width(isa), w, u, transpose_rotate);
    const float* b = nullptr;
    if (bias) {
      if (ws.winograd_bias.size() != P::cout) ws.winograd_bias.resize(P::cout);
      std::fill(std::copy(bias, bias + Gk::out_channels, ws.winograd_bias.data()), ws.winograd_bias.data() + P::cout,
                0.f);
      b = ws.winograd_bias.data();
    }
    for_each_group(ctx, batch, P::group, [&, isa](std::size_t n0, std::size_t count, std::size_t group) {
      float* scratch = cpu::detail::conv_scratch<float>(cpu::winograd::scratch_floats<Gk, M>(group)).data();
      float* xt = scratch + cpu::winograd::GroupScratch<P>::floats(group);
      float* yw = xt + P::Wide::cin * P::Wide::plane;
      cpu::winograd::run_group_dispatch<Gk, M>(isa, n0, count, u.data(), b, scratch, xt, yw, pad, unpad);
    });
  }

  /// run_groups on bf16 dot products: each sample's padded float planes become pair planes
  /// (bf16), then groups of amx_conv::Shape<Gk>::group samples pass through the `engine`'s kernel.
  template <class Gk, class Pad, class Unpad>
  static void run_groups_bf16(CpuContext& ctx, cpu::Bf16Dot engine, std::size_t batch, const bfloat16* packed,
                              const float* bias, Pad&& pad, Unpad&& unpad) {
    using V = cpu::direct::Wide<Gk>;
    using S = cpu::amx_conv::Shape<Gk>;
    for_each_group(ctx, batch, S::group, [&](std::size_t n0, std::size_t count, std::size_t group) {
      constexpr std::size_t out_stride = S::rows * V::positions, pair_stride = S::pair_planes * V::plane;
      // Wide outputs, 32 floats of slack (the fused pool reads past a row's end), the group's
      // pair planes (32-bit words), one sample's padded float planes. Per-thread scratch.
      float* wide =
          cpu::detail::conv_scratch<float>(group * (out_stride + pair_stride) + 32 + V::cin * V::plane).data();
      auto* pairs = reinterpret_cast<std::uint32_t*>(wide + group * out_stride + 32);
      float* xt = wide + group * (out_stride + pair_stride) + 32;
      for (std::size_t i = 0; i < count; ++i) {
        pad(n0 + i, xt);
        cpu::amx_conv::pair_planes<Gk>(xt, pairs + i * pair_stride);
      }
      if (engine == cpu::Bf16Dot::amx)
        cpu::amx_conv::forward_samples<Gk>(pairs, count, packed, bias, wide);
      else
        cpu::avx512_bf16_conv::forward_samples<Gk>(pairs, count, packed, bias, wide);
      for (std::size_t i = 0; i < count; ++i) unpad(n0 + i, wide + i * out_stride);
    });
  }

  /// Runs the direct forward kernel of Gk over `batch` samples in groups of forward_group<Gk>
  /// (for_each_group): `pad(n, xt)` fills sample n's padded planes, `unpad(n, wide)` takes its
  /// wide output. Scratch is per thread.
  template <class Gk, class Pad, class Unpad>
  static void run_groups(CpuContext& ctx, Isa isa, std::size_t batch, std::size_t rows, const float* packed,
                         const float* bias, Pad&& pad, Unpad&& unpad) {
    using V = cpu::direct::plan_t<Gk>;
    for_each_group(ctx, batch, cpu::direct::forward_group<Gk>,
                   [&, isa, rows](std::size_t n0, std::size_t count, std::size_t group) {
                     const std::size_t out_stride = rows * V::positions, in_stride = V::cin * V::channel_stride;
                     // 32 floats of slack: the fused pool reads up to two vectors past a row's end.
                     float* wide = cpu::detail::conv_scratch<float>(group * (out_stride + in_stride) + 32).data();
                     float* xt = wide + group * out_stride;
                     for (std::size_t i = 0; i < count; ++i) pad(n0 + i, xt + i * in_stride);
                     cpu::direct::forward_samples_dispatch<Gk>(isa, xt, count, packed, bias, wide);
                     for (std::size_t i = 0; i < count; ++i) unpad(n0 + i, wide + i * out_stride);
                   });
  }

  /// dW and db (when dw) and dX (when dx) of a direct convolution, dY coming from `dy` (PlainDy
  /// or PooledDy).
  template <class G, class T, class Source>
  static void direct_backward(CpuContext& ctx, const T* x, const T* w, const Source& dy, T* dx, float* dw, float* db,
                              std::size_t batch, bool accumulate, workspace<G, T>& ws) {
    const Isa isa = cpu::active_isa();
    if (dw && !bf16_weight_grad<G>(ctx, x, dy, dw, db, batch, accumulate) &&
        !winograd_weight_grad<G>(ctx, isa, x, dy, dw, db, batch, accumulate)) {
      if constexpr (cpu::direct::channel_weight_grad<G>)
        channel_weight_grad<G>(ctx, isa, x, dy, dw, db, batch, accumulate);
      else
        tiled_weight_grad<G>(ctx, isa, x, dy, dw, db, batch, accumulate);
    }
    if (!dx) return;
    if constexpr (G::stride > 1) {
      strided_dx<G>(ctx, isa, w, dy, dx, batch, ws);
      return;
    }
    // dX: the "full" convolution of dY with the rotated, transposed kernel.
    using Gt = cpu::direct::transposed_geometry<G>;
    using Vt = cpu::direct::Wide<Gt>;
    run_direct<G, Gt>(
        ctx, isa, w, true, nullptr, batch, ws, [&](std::size_t n, float* padded_dy) { dy.padded(n, padded_dy); },
        [&](std::size_t n, const float* wide) {
          float* out = staging<T>(dx + n * G::in_size, G::in_size);
          cpu::direct::unwiden<Gt>(wide, out, Vt::cout);
          unstage(isa, out, dx + n * G::in_size, G::in_size);
        });
  }

  /// dX of a strided convolution: S x S phase convolutions of dY (conv2d_strided.hpp) run by the
  /// forward kernel on one padded copy of each sample's dY, then interleaved into dX.
  template <class G, class T, class Source>
  static void strided_dx(CpuContext& ctx, Isa isa, const T* w, const Source& dy, T* dx, std::size_t batch,
                         workspace<G, T>& ws) {
    constexpr std::size_t S = G::stride, phases = S * S;
    using D0 = cpu::direct::StridedDx<G, 0, 0>;
    // Packed weights of every phase, back to back: phase p's start at offsets[p]. Every phase
    // has Cin output rows, so one forward tile (and row count) serves them all.
    const std::size_t rows = cpu::direct::forward_rows<D0>(isa);
    std::size_t offsets[phases + 1] = {};
    [&]<std::size_t... P>(std::index_sequence<P...>) {
      ((offsets[P + 1] = offsets[P] + rows * D0::cin * cpu::direct::StridedDx<G, P / S, P % S>::taps), ...);
    }
    (std::make_index_sequence<phases>{});
    ws.packed_t.resize(offsets[phases]);
    [&]<std::size_t... P>(std::index_sequence<P...>) {
      (pack_phase<G, P / S, P % S>(isa, w, ws.packed_t.data() + offsets[P]), ...);
    }
    (std::make_index_sequence<phases>{});
    const float* packed = ws.packed_t.data();
    for_each_group(ctx, batch, cpu::direct::forward_group<D0>,
                   [&, isa, rows](std::size_t n0, std::size_t count, std::size_t group) {
                     const std::size_t out_stride = rows * D0::positions, in_stride = D0::cin * D0::plane;
                     float* wide = cpu::detail::conv_scratch<float>(group * (phases * out_stride + in_stride)).data();
                     float* planes = wide + phases * group * out_stride;
                     for (std::size_t i = 0; i < count; ++i) dy.padded_strided(n0 + i, planes + i * in_stride);
                     [&]<std::size_t... P>(std::index_sequence<P...>) {
                       ((cpu::direct::StridedDx<G, P / S, P % S>::taps > 0
                             ? cpu::direct::forward_samples_dispatch<cpu::direct::StridedDx<G, P / S, P % S>>(
                                   isa, planes, count, packed + offsets[P], nullptr, wide + P * group * out_stride)
                             : void()),
                        ...);
                     }
                     (std::make_index_sequence<phases>{});
                     for (std::size_t i = 0; i < count; ++i) {
                       float* out = staging<T>(dx + (n0 + i) * G::in_size, G::in_size);
                       cpu::direct::scatter_phases<G>(
                           [&](std::size_t a, std::size_t b) -> const float* {
                             return offsets[a * S + b + 1] == offsets[a * S + b]
                                        ? nullptr
                                        : wide + (a * S + b) * group * out_stride + i * out_stride;
                           },
                           out);
                       unstage(isa, out, dx + (n0 + i) * G::in_size, G::in_size);
                     }
                   });
  }
  template <class G, std::size_t A, std::size_t B, class T>
  static void pack_phase(Isa isa, const T* w, float* out) {
    using D = cpu::direct::StridedDx<G, A, B>;
    if constexpr (D::taps > 0)
      cpu::dispatch_isa(
          isa, [&] { cpu::direct::pack_strided_dx<G, A, B, cpu::direct::ForwardTile<16, D>::mr>(w, out); },
          [&] { cpu::direct::pack_strided_dx<G, A, B, cpu::direct::ForwardTile<8, D>::mr>(w, out); },
          [&] { cpu::direct::pack_strided_dx<G, A, B, cpu::direct::ForwardTile<4, D>::mr>(w, out); });
    else
      (void)isa, (void)w, (void)out;
  }
};

} // namespace cohort::cpu::conv2d_paths
