#pragma once
/// \file
/// Conv2d on the CPU. Stride-1 layers run the direct kernel on wide planes (conv2d_direct.hpp),
/// for bfloat16 on bf16 dot-product hardware where the CPU has it (AMX tiles, conv2d_amx.hpp, or
/// AVX512-BF16 vectors, conv2d_avx512_bf16.hpp: cpu::bf16_dot_engine()); strided layers run the same
/// kernel on phase planes (conv2d_strided.hpp). The im2col + GEMM path is left for double and for
/// padding >= kernel.
///
/// The im2col forward pass writes the bias into the output first and lets the GEMM accumulate
/// onto it; its backward pass recomputes the im2col matrix instead of keeping one per sample
/// (which would cost batch x patch x plane floats of memory).
///
/// A null bias (Conv2d<..., false>) means none: no bias is added forward, and backward neither
/// sums dY for it nor writes a gradient (db is null then too).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

namespace cohort {
namespace cpu {

/// col (patch, out_plane) from one (C, H, W) sample; zero where the window hangs over the padding.
template <class G, class T>
void im2col(const T* x, T* col) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        std::fill(row, row + rows.first * G::out_w, T(0));
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          const T* in = x + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          T* out = row + oh * G::out_w;
          std::fill(out, out + cols.first, T(0));
          if constexpr (G::stride == 1)
            std::copy(in + cols.first, in + cols.last, out + cols.first);
          else
            for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow] = in[ow * G::stride];
          std::fill(out + cols.last, out + G::out_w, T(0));
        }
        std::fill(row + rows.last * G::out_w, row + G::out_plane, T(0));
      }
    }
}

/// dx += scatter of col (patch, out_plane) back onto one (C, H, W) sample.
template <class G, class T>
void col2im_add(const T* col, T* dx) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        const T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          T* out = dx + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          const T* in = row + oh * G::out_w;
          for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow * G::stride] += in[ow];
        }
      }
    }
}

} // namespace cpu

namespace cpu::detail {
/// Batch-sized buffers of the calling thread, one per slot, shared by every layer's backward
/// pass: they grow to the largest layer's need, then never allocate.
inline float* transient(int slot, std::size_t n) {
  thread_local HostBuffer<float> buffers[4];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

/// Per-thread scratch for im2col matrices: grows to the largest layer, then never allocates.
template <class T>
HostBuffer<T>& conv_scratch(std::size_t n) {
  thread_local HostBuffer<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer;
}
} // namespace cpu::detail

template <>
struct ops::Conv2dKernels<Cpu> {
  /// What a layer keeps between calls: its packed weights and, when a ReLU and a max-pool are
  /// fused into it, the pool's argmax. Batch-sized buffers (padded inputs, transposed dY) are
  /// per-thread transients shared by every layer, so memory grows with the largest layer, not
  /// with the sum of them.
  template <class G, class T>
  struct workspace {
    HostBuffer<float> packed, packed_t;            // weights for forward and for dX
    HostBuffer<bfloat16> amx_packed, amx_packed_t; // the same for the bf16 dot kernels (AMX layout)
    HostBuffer<float> bias, bias_tiles;            // the bias in float (16-bit storage types), as AMX tiles
    HostBuffer<float> winograd, winograd_t;        // Winograd-transformed weights, forward and dX
    HostBuffer<float> winograd_bias;               // the bias padded to the Winograd output channels
    HostBuffer<std::uint8_t> window;               // fused pool: argmax of each window (2*down + right)
    void reserve(std::size_t) noexcept {}
  };

  /// The direct path runs stride-1 convolutions of float and of the 16-bit storage types (those
  /// converted at the edges, float inside, except bfloat16 on bf16 dot products: run_direct,
  /// bf16_weight_grad);
  /// the im2col path everything else.
  template <class G, class T>
  static constexpr bool use_direct = (std::is_same_v<T, float> ||
                                      cpu::is_half_type<T>)&&(cpu::direct::applicable<G> ||
                                                              cpu::direct::strided_applicable<G>);
  /// A following ReLU can be applied inside the kernels (the executor then skips it).
  template <class G, class T>
  static constexpr bool fuses_relu = use_direct<G, T>;
  /// A following ReLU and then a 2x2, stride-2 max-pool (geometry PG) can run inside the
  /// kernels: the convolution's full-size output and gradient then never go to memory.
  template <class G, class PG, class T>
  static constexpr bool fuses_relu_pool =
      use_direct<G, T>&& G::stride == 1 && PG::kernel == 2 && PG::stride == 2 && PG::padding == 0 &&
      PG::channels == G::out_channels&& PG::in_h == G::out_h&& PG::in_w == G::out_w;

  /// `relu`: write max(output, 0) (only when fuses_relu).
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>& ws,
                      bool relu = false) {
    if constexpr (use_direct<G, T>)
      direct_forward<G>(ctx, x, w, b, y, batch, ws, relu);
    else if constexpr (cpu::is_half_type<T>)
      via_float_forward<G>(ctx, x, w, b, y, batch);
    else
      im2col_forward<G>(ctx, x, w, b, y, batch);
  }

  /// `relu_y`: the output of a fused ReLU (dy is then that ReLU's output gradient). dw and db
  /// are in the accumulator type (float for the 16-bit storage types).
  template <class G, class T>
  static void backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, accumulator_t<T>* dw,
                       accumulator_t<T>* db, std::size_t batch, bool accumulate, workspace<G, T>& ws,
                       const T* relu_y = nullptr) {
    if constexpr (use_direct<G, T>)
      direct_backward<G>(ctx, x, w, cpu::direct::PlainDy<G, T>{dy, relu_y}, dx, dw, db, batch, accumulate, ws);
    else if constexpr (cpu::is_half_type<T>)
      via_float_backward<G>(ctx, x, w, dy, dx, dw, db, batch, accumulate);
    else
      im2col_backward<G>(ctx, x, w, dy, dx, dw, db, batch, accumulate);
  }

  /// Conv2d -> ReLU -> MaxPool2d<2> (when fuses_relu_pool): writes the pool's output (batch,
  /// PG::out_size) and keeps each window's argmax for backward_relu_pool.
  template <class G, class PG, class T>
  static void forward_relu_pool(CpuContext& ctx, const T* x, const T* w, const T* b, T* pooled, std::size_t batch,
                                workspace<G, T>& ws) {
    static_assert(fuses_relu_pool<G, PG, T>, "Conv2dKernels<Cpu>: this convolution and pool cannot be fused");
    const Isa isa = cpu::active_isa();
    if (ws.window.size() < batch * PG::out_size) ws.window.resize(batch * PG::out_size);
    std::uint8_t* window = ws.window.data();
    run_direct<G, G>(
        ctx, isa, w, false, float_bias<G>(isa, b, ws), batch, ws,
        [&](std::size_t n, float* xt) { cpu::direct::pad_sample<G>(sample(x, n, G::in_size), xt); },
        [&](std::size_t n, const float* wide) {
          float* out = staging<T>(pooled + n * PG::out_size, PG::out_size);
          cpu::direct::pool_wide_dispatch<G>(isa, wide, out, window + n * PG::out_size);
          unstage(isa, out, pooled + n * PG::out_size, PG::out_size);
        });
  }

  /// Backward of forward_relu_pool: `dpool` is the gradient of the pool's output, `pooled` that
  /// output.
  template <class G, class PG, class T>
  static void backward_relu_pool(CpuContext& ctx, const T* x, const T* w, const T* dpool, const T* pooled, T* dx,
                                 accumulator_t<T>* dw, accumulator_t<T>* db, std::size_t batch, bool accumulate,
                                 workspace<G, T>& ws) {
    static_assert(fuses_relu_pool<G, PG, T>, "Conv2dKernels<Cpu>: this convolution and pool cannot be fused");
    direct_backward<G>(ctx, x, w, cpu::direct::PooledDy<G, T>{dpool, pooled, ws.window.data()}, dx, dw, db, batch,
                       accumulate, ws);
  }

 private:
  // ---- conversions at the edges of the direct path (16-bit storage types) -----------------------

  /// Sample n of a (batch, size) tensor as floats (per-thread scratch slot 2 unless float).
  template <class T>
  static const float* sample(const T* p, std::size_t n, std::size_t size) {
    return cpu::direct::as_floats(p + n * size, size, 2);
  }
  /// Where a kernel writes `n` floats that end up in `dst`: dst itself for float, else scratch.
  template <class T>
  static float* staging(T* dst, std::size_t n) {
    if constexpr (std::is_same_v<T, float>)
      return dst;
    else
      return cpu::convert_scratch(3, n);
  }
  template <class T>
  static void unstage(Isa isa, const float* src, T* dst, std::size_t n) {
    if constexpr (!std::is_same_v<T, float>) cpu::store_floats(isa, src, dst, n);
  }
  template <class G, class T>
  static const float* float_bias(Isa isa, const T* b, workspace<G, T>& ws) {
    if constexpr (std::is_same_v<T, float>) {
      return b;
    } else {
      if (!b) return nullptr;
      ws.bias.resize(G::out_channels);
      cpu::load_floats(isa, b, ws.bias.data(), G::out_channels);
      return ws.bias.data();
    }
  }

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

  /// Whether the forward kernel of Gk can run on bf16 dot products (AMX tiles or AVX512-BF16
  /// vectors: the same layers, data and packing) for storage type T; the CPU decides at run time.
  template <class Gk, class T>
  static constexpr bool bf16_dot_path = std::is_same_v<T, bfloat16>&& cpu::amx_conv::applicable<Gk>;

  /// The bf16 dot-product engine Gk runs on now: bf16_dot_engine(), except that AVX512-BF16
  /// yields to Winograd where conv_algorithm<Gk>() picks it. Its 2x the FMA rate buys no more
  /// than F(2x2, 3x3)'s 2.25x fewer products (Zen 4, model D's 128->256 layer at batch 128:
  /// forward 76 ms either way, backward 179 ms on bf16 vectors against 154 ms by Winograd in
  /// float). AMX (15x the FMA rate) always runs.
  template <class Gk>
  static cpu::Bf16Dot bf16_engine_for() noexcept {
    const cpu::Bf16Dot engine = cpu::bf16_dot_engine();
    if (engine == cpu::Bf16Dot::avx512 && cpu::conv_algorithm<Gk>() != cpu::ConvAlgorithm::direct)
      return cpu::Bf16Dot::none;
    return engine;
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
      switch (cpu::conv_algorithm<Gk>()) {
      case cpu::ConvAlgorithm::winograd_f2:
        return run_winograd<G, Gk, 2>(ctx, isa, w, transpose_rotate, bias, batch, ws, pad, unpad);
      case cpu::ConvAlgorithm::winograd_f4:
        return run_winograd<G, Gk, 4>(ctx, isa, w, transpose_rotate, bias, batch, ws, pad, unpad);
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

  /// Calls `group_fn(n0, count, group)` for the batch cut into groups of at most `max_group`
  /// consecutive samples, the groups split between threads; `group` bounds every group's size.
  /// The batch is first cut into equal chunks of samples, 4 per thread, which threads claim as
  /// they come free, and each chunk into groups: whole groups would not split evenly (22 groups
  /// of 6 samples went 12:10 between two threads).
  template <class GroupFn>
  static void for_each_group(CpuContext& ctx, std::size_t batch, std::size_t max_group, GroupFn&& group_fn) {
    const std::size_t chunks = std::min(batch, 4 * ctx.threads().size());
    const std::size_t per_chunk = (batch + chunks - 1) / chunks, group = std::min(max_group, per_chunk);
    ctx.threads().parallel_for(chunks, 1, [&, per_chunk, group](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        const std::size_t end = std::min(batch, (c + 1) * per_chunk);
        for (std::size_t n0 = c * per_chunk; n0 < end; n0 += group) group_fn(n0, std::min(group, end - n0), group);
      }
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

  /// dW, db and (when dx) dX of a direct convolution, dY coming from `dy` (PlainDy or PooledDy).
  template <class G, class T, class Source>
  static void direct_backward(CpuContext& ctx, const T* x, const T* w, const Source& dy, T* dx, float* dw, float* db,
                              std::size_t batch, bool accumulate, workspace<G, T>& ws) {
    const Isa isa = cpu::active_isa();
    if (!bf16_weight_grad<G>(ctx, x, dy, dw, db, batch, accumulate) &&
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
      auto* xtp = reinterpret_cast<std::uint32_t*>(cpu::detail::transient(0, batch * S::x_size));
      auto* dyb = reinterpret_cast<bfloat16*>(cpu::detail::transient(1, (batch * S::dy_size + 1) / 2));
      float* parts = cpu::detail::transient(2, chunks * S::part_size);
      float* db_n = cpu::detail::transient(3, batch * G::out_channels);
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
      switch (cpu::conv_algorithm<G>()) {
      case cpu::ConvAlgorithm::winograd_f2:
        winograd_weight_grad<G, 2>(ctx, isa, x, dy, dw, db, batch, accumulate);
        return true;
      case cpu::ConvAlgorithm::winograd_f4:
        winograd_weight_grad<G, 4>(ctx, isa, x, dy, dw, db, batch, accumulate);
        return true;
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
    float* xp = cpu::detail::transient(0, P::transformed(group));
    float* dh = xp + P::positions * group * P::tiles * P::cin;
    float* acc = cpu::detail::transient(1, P::acc_size);
    float* db_n = cpu::detail::transient(3, batch * P::dy_channels);
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
    float* padded = cpu::detail::transient(0, batch * V::cin * V::channel_stride);
    float* dyt = cpu::detail::transient(1, batch * valid * shape.padded_cout);
    float* db_n = cpu::detail::transient(3, batch * shape.padded_cout); // per-sample bias sums
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
    float* dw_t = cpu::detail::transient(2, chunks * part);
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
    float* padded = cpu::detail::transient(0, batch * V::plane);
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

  // ---- im2col path: any stride, any T -----------------------------------------------------------

  /// Samples are independent: split them between threads.
  template <class G, class T>
  static void im2col_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    ctx.threads().parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      T* col = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      for (std::size_t n = lo; n < hi; ++n) {
        T* yn = y + n * G::out_size;
        if (b)
          for (std::size_t o = 0; o < G::out_channels; ++o)
            std::fill(yn + o * G::out_plane, yn + (o + 1) * G::out_plane, b[o]);
        cpu::im2col<G>(x + n * G::in_size, col);
        // Onto the bias, or (beta 0) over whatever the output held.
        cpu::gemm(false, false, G::out_channels, G::out_plane, G::patch, T(1), w, G::patch, col, G::out_plane,
                  T(b ? 1 : 0), yn, G::out_plane);
      }
    });
  }

  /// dW and db sum over samples, so they are split by output channel (each thread sums all
  /// samples for its channels, in sample order: the same result for any thread count); dX is
  /// split by sample.
  template <class G, class T>
  static void im2col_backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                              std::size_t batch, bool accumulate) {
    ThreadPool& pool = ctx.threads();
    const std::size_t per_thread = (G::out_channels + pool.size() - 1) / pool.size();
    pool.parallel_for(G::out_channels, per_thread, [&](std::size_t o0, std::size_t o1) {
      T* col = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      if (!accumulate) {
        std::fill(dw + o0 * G::patch, dw + o1 * G::patch, T(0));
        if (db) std::fill(db + o0, db + o1, T(0));
      }
      for (std::size_t n = 0; n < batch; ++n) {
        const T* dyn = dy + n * G::out_size;
        for (std::size_t o = o0; db && o < o1; ++o) {
          T s = 0;
          for (std::size_t p = 0; p < G::out_plane; ++p) s += dyn[o * G::out_plane + p];
          db[o] += s;
        }
        cpu::im2col<G>(x + n * G::in_size, col);
        // dW (out, patch) += dY_n (out, plane) * col^T (plane, patch), rows o0..o1
        cpu::gemm(false, true, o1 - o0, G::patch, G::out_plane, T(1), dyn + o0 * G::out_plane, G::out_plane, col,
                  G::out_plane, T(1), dw + o0 * G::patch, G::patch);
      }
    });
    if (!dx) return;
    pool.parallel_for(batch, 1, [&](std::size_t lo, std::size_t hi) {
      T* dcol = cpu::detail::conv_scratch<T>(G::patch * G::out_plane).data();
      for (std::size_t n = lo; n < hi; ++n) {
        // dcol (patch, plane) = W^T (patch, out) * dY_n (out, plane), then scattered onto dx
        cpu::gemm(true, false, G::patch, G::out_plane, G::out_channels, T(1), w, G::patch, dy + n * G::out_size,
                  G::out_plane, T(0), dcol, G::out_plane);
        T* dxn = dx + n * G::in_size;
        std::fill(dxn, dxn + G::in_size, T(0));
        cpu::col2im_add<G>(dcol, dxn);
      }
    });
  }

  // ---- 16-bit storage without a direct path (stride > 1): through float copies -----------------

  /// Converts to float, runs the float im2col path, converts back. Rare layers only: the batch
  /// is copied twice.
  template <class G, class T>
  static void via_float_forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    const Isa isa = cpu::active_isa();
    float* xf = cpu::detail::transient(0, batch * G::in_size);
    float* yf = cpu::detail::transient(1, batch * G::out_size);
    float* wf = cpu::detail::transient(2, G::out_channels * G::patch + G::out_channels);
    cpu::load_floats(isa, x, xf, batch * G::in_size);
    cpu::load_floats(isa, w, wf, G::out_channels * G::patch);
    if (b) cpu::load_floats(isa, b, wf + G::out_channels * G::patch, G::out_channels);
    im2col_forward<G>(ctx, xf, wf, b ? wf + G::out_channels * G::patch : nullptr, yf, batch);
    cpu::store_floats(isa, yf, y, batch * G::out_size);
  }
  template <class G, class T>
  static void via_float_backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, float* dw, float* db,
                                 std::size_t batch, bool accumulate) {
    const Isa isa = cpu::active_isa();
    float* xf = cpu::detail::transient(0, batch * (G::in_size + G::out_size));
    float* dyf = xf + batch * G::in_size;
    float* wf = cpu::detail::transient(2, G::out_channels * G::patch);
    float* dxf = dx ? cpu::detail::transient(1, batch * G::in_size) : nullptr;
    cpu::load_floats(isa, x, xf, batch * G::in_size);
    cpu::load_floats(isa, dy, dyf, batch * G::out_size);
    cpu::load_floats(isa, w, wf, G::out_channels * G::patch);
    im2col_backward<G>(ctx, xf, wf, dyf, dxf, dw, db, batch, accumulate);
    if (dx) cpu::store_floats(isa, dxf, dx, batch * G::in_size);
  }
};

} // namespace cohort
