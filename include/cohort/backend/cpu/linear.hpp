#pragma once
/// \file
/// Linear on the CPU: one GEMM per pass over the whole batch.

#include <algorithm>
#include <cstddef>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

template <>
struct ops::LinearKernels<Cpu> {
  template <std::size_t In, std::size_t Out, class T>
  struct workspace {
    HostBuffer<float> weight; // 16-bit storage: the weights in float, converted each forward
    void reserve(std::size_t) noexcept {}
  };

  template <std::size_t In, std::size_t Out, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<In, Out, T>& ws) {
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

  /// dw and db in the accumulator type (float for the 16-bit storage types).
  template <std::size_t In, std::size_t Out, class T>
  static void backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, accumulator_t<T>* dw,
                       accumulator_t<T>* db, std::size_t batch, bool accumulate, workspace<In, Out, T>& ws) {
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

} // namespace cohort
