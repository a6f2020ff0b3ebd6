#pragma once
/// \file
/// Linear on the CPU: one GEMM per pass over the whole batch.
///
/// bfloat16 storage on a CPU with a bf16 dot-product engine (AMX; see gemm_bf16.hpp): y and dX
/// come from bf16 products with float accumulation, straight from the bf16 tensors; dW stays a
/// float GEMM (parameter gradients keep the float path's bits). Elsewhere, and for fp16, the
/// tensors are converted and the float kernels run.

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/gemm_bf16.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

template <>
struct ops::LinearKernels<Cpu> {
  template <std::size_t In, std::size_t Out, class T>
  struct workspace {
    HostBuffer<float> weight;    // 16-bit storage: the weights in float, converted each forward
    HostBuffer<bfloat16> packed; // bf16 dot products: W packed for y (forward) or dX (backward)
    void reserve(std::size_t) noexcept {}
  };

  template <std::size_t In, std::size_t Out, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<In, Out, T>& ws);

  /// Gradients of input, weights and bias (op_arguments.hpp); dw and db in the accumulator type
  /// (float for the 16-bit storage types).
  template <std::size_t In, std::size_t Out, class T>
  static void backward(CpuContext& ctx, const LinearBackwardArgs<T>& a, workspace<In, Out, T>& ws);

 private:
  template <std::size_t In, std::size_t Out, class T>
  static void forward_float(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch) {
    for (std::size_t n = 0; n < batch; ++n) std::copy(b, b + Out, y + n * Out);
    // y (batch, out) += x (batch, in) * W^T (in, out)
    cpu::gemm(ctx.threads(), false, true, batch, Out, In, T(1), x, In, w, In, T(1), y, Out);
  }

  template <std::size_t In, std::size_t Out, class T>
  static void backward_float(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                             std::size_t batch, bool accumulate) {
    // dW (out, in) = dY^T (out, batch) * x (batch, in)
    cpu::gemm(ctx.threads(), true, false, Out, In, batch, T(1), dy, Out, x, In, accumulate ? T(1) : T(0), dw, In);
    if (!accumulate) std::fill(db, db + Out, T(0));
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t o = 0; o < Out; ++o) db[o] += dy[n * Out + o];
    // dx (batch, in) = dY (batch, out) * W (out, in)
    if (dx) cpu::gemm(ctx.threads(), false, false, batch, In, Out, T(1), dy, Out, w, In, T(0), dx, In);
  }
};

// The entry points, defined out of the class and not inline: a translation unit built against
// the compiled kernel library (COHORT_COMPILED_KERNELS) declares the instantiations it finds
// there `extern template` and instantiates none of this (backend/cpu/compiled_instances.hpp).

template <std::size_t In, std::size_t Out, class T>
void ops::LinearKernels<Cpu>::forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                                      workspace<In, Out, T>& ws) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (const cpu::Bf16Dot engine = cpu::bf16_dot_engine(); engine != cpu::Bf16Dot::none) {
      // y (batch, out) = b + x (batch, in) * W^T (in, out), bf16 products, float sums.
      const Isa isa = cpu::active_isa();
      ws.packed.resize(cpu::packed_bf16_size(In, Out));
      cpu::pack_bf16_pairs(w, true, In, In, Out, ws.packed.data());
      float* yf = cpu::convert_scratch(1, batch * Out);
      cpu::load_floats(isa, b, yf, Out);
      for (std::size_t n = 1; n < batch; ++n) std::copy(yf, yf + Out, yf + n * Out);
      cpu::gemm_bf16(ctx.threads(), engine, batch, Out, In, x, In, ws.packed.data(), yf, Out, true);
      cpu::store_floats(isa, yf, y, batch * Out);
      return;
    }
  }
  if constexpr (cpu::is_half_type<T>) {
    // Float inside: x, W and b converted, y converted back (fp32 accumulation).
    const Isa isa = cpu::active_isa();
    ws.weight.resize(Out * In + Out);
    cpu::load_floats(isa, w, ws.weight.data(), Out * In);
    cpu::load_floats(isa, b, ws.weight.data() + Out * In, Out);
    float* xf = cpu::convert_scratch(0, batch * In);
    float* yf = cpu::convert_scratch(1, batch * Out);
    cpu::load_floats(isa, x, xf, batch * In);
    forward_float<In, Out>(ctx, xf, ws.weight.data(), ws.weight.data() + Out * In, yf, batch);
    cpu::store_floats(isa, yf, y, batch * Out);
  } else {
    forward_float<In, Out>(ctx, x, w, b, y, batch);
  }
}

template <std::size_t In, std::size_t Out, class T>
void ops::LinearKernels<Cpu>::backward(CpuContext& ctx, const LinearBackwardArgs<T>& a, workspace<In, Out, T>& ws) {
  const T *x = a.x, *w = a.w, *dy = a.dy;
  T* dx = a.dx;
  accumulator_t<T>*dw = a.dw, *db = a.db;
  const std::size_t batch = a.batch;
  const bool accumulate = a.accumulate;
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (const cpu::Bf16Dot engine = cpu::bf16_dot_engine(); engine != cpu::Bf16Dot::none) {
      const Isa isa = cpu::active_isa();
      float* xf = cpu::convert_scratch(0, batch * In);
      float* dyf = cpu::convert_scratch(1, batch * Out);
      cpu::load_floats(isa, x, xf, batch * In);
      cpu::load_floats(isa, dy, dyf, batch * Out);
      backward_float<In, Out>(ctx, xf, static_cast<const float*>(nullptr), dyf, static_cast<float*>(nullptr), dw, db,
                              batch, accumulate); // dW, db in float; no dX there
      if (!dx) return;
      // dX (batch, in) = dY (batch, out) * W (out, in), bf16 products, float sums.
      ws.packed.resize(cpu::packed_bf16_size(Out, In));
      cpu::pack_bf16_pairs(w, false, In, Out, In, ws.packed.data());
      float* dxf = cpu::convert_scratch(2, batch * In);
      cpu::gemm_bf16(ctx.threads(), engine, batch, In, Out, dy, Out, ws.packed.data(), dxf, In, false);
      cpu::store_floats(isa, dxf, dx, batch * In);
      return;
    }
  }
  if constexpr (cpu::is_half_type<T>) {
    const Isa isa = cpu::active_isa();
    float* xf = cpu::convert_scratch(0, batch * In);
    float* dyf = cpu::convert_scratch(1, batch * Out);
    float* dxf = dx ? cpu::convert_scratch(2, batch * In) : nullptr;
    cpu::load_floats(isa, x, xf, batch * In);
    cpu::load_floats(isa, dy, dyf, batch * Out);
    // ws.weight still holds this step's weights in float (forward converted them).
    backward_float<In, Out>(ctx, xf, ws.weight.data(), dyf, dxf, dw, db, batch, accumulate);
    if (dx) cpu::store_floats(isa, dxf, dx, batch * In);
  } else {
    backward_float<In, Out>(ctx, x, w, dy, dx, dw, db, batch, accumulate);
  }
}

} // namespace cohort
