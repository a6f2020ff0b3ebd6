#pragma once
/// \file
/// Conv2d on the CPU. Float 1x1 layers (stride 1, no padding) run as per-sample matrix products
/// (conv2d_pointwise.hpp). Other stride-1 layers run the direct kernel on wide planes (conv2d_direct.hpp),
/// for bfloat16 on bf16 dot-product hardware where the CPU has it (AMX tiles, conv2d_amx.hpp, or
/// AVX512-BF16 vectors, conv2d_avx512_bf16.hpp: cpu::bf16_dot_engine()); strided layers run the same
/// kernel on phase planes (conv2d_strided.hpp). The im2col + GEMM path is left for double and for
/// padding >= kernel.
///
/// The im2col forward pass writes the bias into the output first and lets the GEMM accumulate
/// onto it; its backward pass recomputes the im2col matrix instead of keeping one per sample
/// (which would cost batch x patch x plane floats of memory).
///
/// This file is the dispatch (CUB's facade -> dispatch -> agent layering): which path a layer
/// takes, chosen at compile time from its geometry and storage type. The paths, each a struct of
/// static functions deriving from the one it builds on:
///
///     conv2d_path_common.hpp       workspace, transient buffers, 16-bit edges, groups of samples
///     conv2d_path_weight_grad.hpp  dW and db of the direct path (bf16 dots, Winograd, tiled, per channel)
///     conv2d_path_direct.hpp       forward and dX on wide / phase planes (and Winograd)
///     conv2d_path_im2col.hpp       im2col + GEMM, and 16-bit storage through float copies
///
/// A null bias (Conv2d<..., false>) means none: no bias is added forward, and backward neither
/// sums dY for it nor writes a gradient (db is null then too). A null dw asks backward for dX
/// alone (ConvTranspose2d's forward pass): x is not read then.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d_path_im2col.hpp"
#include "cohort/backend/cpu/conv2d_pointwise.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

template <>
struct ops::Conv2dKernels<Cpu> : cpu::conv2d_paths::Im2colPath {
  /// The direct path runs stride-1 convolutions of float and of the 16-bit storage types (those
  /// converted at the edges, float inside, except bfloat16 on bf16 dot products: run_direct,
  /// bf16_weight_grad);
  /// the im2col path everything else.
  template <class G, class T>
  static constexpr bool use_direct = (std::is_same_v<T, float> ||
                                      cpu::is_half_type<T>)&&(cpu::direct::applicable<G> ||
                                                              cpu::direct::strided_applicable<G>);
  /// Float 1x1 convolutions (stride 1, no padding) run as per-sample matrix products instead
  /// (conv2d_pointwise.hpp): no padded plane copies.
  template <class G, class T>
  static constexpr bool use_pointwise = std::is_same_v<T, float>&& cpu::pointwise::applicable<G>;
  /// A following ReLU can be applied inside the kernels (the executor then skips it).
  template <class G, class T>
  static constexpr bool fuses_relu = use_direct<G, T> || use_pointwise<G, T>;
  /// A following ReLU and then a 2x2, stride-2 max-pool (geometry PG) can run inside the
  /// kernels: the convolution's full-size output and gradient then never go to memory.
  template <class G, class PG, class T>
  static constexpr bool fuses_relu_pool =
      use_direct<G, T> && !use_pointwise<G, T> && G::stride == 1 && PG::kernel == 2 && PG::stride == 2 &&
      PG::padding == 0 && PG::channels == G::out_channels && PG::in_h == G::out_h && PG::in_w == G::out_w;

  /// `relu`: write max(output, 0) (only when fuses_relu).
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch, workspace<G, T>& ws,
                      bool relu = false);

  /// Gradients of input, weights and bias (op_arguments.hpp says which buffer is which).
  template <class G, class T>
  static void backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a, workspace<G, T>& ws);

  /// Conv2d -> ReLU -> MaxPool2d<2> (when fuses_relu_pool): writes the pool's output (batch,
  /// PG::out_size) and keeps each window's argmax for backward_relu_pool.
  template <class G, class PG, class T>
  static void forward_relu_pool(CpuContext& ctx, const T* x, const T* w, const T* b, T* pooled, std::size_t batch,
                                workspace<G, T>& ws);

  /// Backward of forward_relu_pool.
  template <class G, class PG, class T>
  static void backward_relu_pool(CpuContext& ctx, const Conv2dReluPoolBackwardArgs<T>& a, workspace<G, T>& ws);
};

// The entry points, defined out of the class and not inline: a translation unit built against
// the compiled kernel library (COHORT_COMPILED_KERNELS) declares the instantiations it finds
// there `extern template` and instantiates none of this (backend/cpu/compiled_instances.hpp).

template <class G, class T>
void ops::Conv2dKernels<Cpu>::forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                                      workspace<G, T>& ws, bool relu) {
  if constexpr (use_pointwise<G, T>)
    cpu::pointwise::forward<G>(ctx, cpu::active_isa(), x, w, b, y, batch, relu);
  else if constexpr (use_direct<G, T>)
    direct_forward<G>(ctx, x, w, b, y, batch, ws, relu);
  else if constexpr (cpu::is_half_type<T>)
    via_float_forward<G>(ctx, x, w, b, y, batch);
  else
    im2col_forward<G>(ctx, x, w, b, y, batch);
}

template <class G, class T>
void ops::Conv2dKernels<Cpu>::backward(CpuContext& ctx, const Conv2dBackwardArgs<T>& a, workspace<G, T>& ws) {
  if constexpr (use_pointwise<G, T>) {
    const Isa isa = cpu::active_isa();
    const float* dy = cpu::pointwise::masked_dy<G>(ctx, a.dy, a.relu_y, a.batch);
    if (a.dx) cpu::pointwise::input_grad<G>(ctx, isa, a.w, dy, a.dx, a.batch);
    if (!a.dw) return;
    if constexpr (cpu::pointwise::weight_grad_pays<G>)
      cpu::pointwise::weight_grad<G>(ctx, isa, a.x, dy, a.dw, a.db, a.batch, a.accumulate);
    else // (the direct path masks dY itself, into buffers of its own)
      direct_backward<G>(ctx, a.x, a.w, cpu::direct::PlainDy<G, T>{a.dy, a.relu_y}, static_cast<T*>(nullptr), a.dw,
                         a.db, a.batch, a.accumulate, ws);
  } else if constexpr (use_direct<G, T>)
    direct_backward<G>(ctx, a.x, a.w, cpu::direct::PlainDy<G, T>{a.dy, a.relu_y}, a.dx, a.dw, a.db, a.batch,
                       a.accumulate, ws);
  else if constexpr (cpu::is_half_type<T>)
    via_float_backward<G>(ctx, a.x, a.w, a.dy, a.dx, a.dw, a.db, a.batch, a.accumulate);
  else
    im2col_backward<G>(ctx, a.x, a.w, a.dy, a.dx, a.dw, a.db, a.batch, a.accumulate);
}

template <class G, class PG, class T>
void ops::Conv2dKernels<Cpu>::forward_relu_pool(CpuContext& ctx, const T* x, const T* w, const T* b, T* pooled,
                                                std::size_t batch, workspace<G, T>& ws) {
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

template <class G, class PG, class T>
void ops::Conv2dKernels<Cpu>::backward_relu_pool(CpuContext& ctx, const Conv2dReluPoolBackwardArgs<T>& a,
                                                 workspace<G, T>& ws) {
  static_assert(fuses_relu_pool<G, PG, T>, "Conv2dKernels<Cpu>: this convolution and pool cannot be fused");
  direct_backward<G>(ctx, a.x, a.w, cpu::direct::PooledDy<G, T>{a.dpool, a.pooled, ws.window.data()}, a.dx, a.dw, a.db,
                     a.batch, a.accumulate, ws);
}

} // namespace cohort
