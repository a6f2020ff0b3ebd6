#pragma once
/// \file
/// Linear on the CPU: one GEMM per pass over the whole batch.

#include <algorithm>
#include <cstddef>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

template <>
struct ops::LinearKernels<Cpu> {
  template <std::size_t In, std::size_t Out, class T>
  struct workspace {
    void reserve(std::size_t) noexcept {}
  };

  template <std::size_t In, std::size_t Out, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<In, Out, T>&) {
    for (std::size_t n = 0; n < batch; ++n) std::copy(b, b + Out, y + n * Out);
    // y (batch, out) += x (batch, in) * W^T (in, out)
    cpu::gemm(ctx.threads(), false, true, batch, Out, In, T(1), x, In, w, In, T(1), y, Out);
  }

  template <std::size_t In, std::size_t Out, class T>
  static void backward(CpuContext& ctx, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::size_t batch,
                       bool accumulate, workspace<In, Out, T>&) {
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
