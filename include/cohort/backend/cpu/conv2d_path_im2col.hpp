#pragma once
/// \file
/// The im2col + GEMM path (backend/cpu/conv2d.hpp): what the direct path does not take (double,
/// padding >= kernel), and 16-bit storage without a direct path through float copies.

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

#include "cohort/backend/cpu/conv2d_path_direct.hpp"

namespace cohort::cpu::conv2d_paths {

struct Im2colPath : DirectPath {
 protected:
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
    if (dw) {
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
    }
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
    float* xf = cpu::detail::transient(cpu::detail::Transient::input, batch * G::in_size);
    float* yf = cpu::detail::transient(cpu::detail::Transient::output, batch * G::out_size);
    float* wf = cpu::detail::transient(cpu::detail::Transient::partials, G::out_channels * G::patch + G::out_channels);
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
    float* xf = cpu::detail::transient(cpu::detail::Transient::input, batch * (G::in_size + G::out_size));
    float* dyf = xf + batch * G::in_size;
    float* wf = cpu::detail::transient(cpu::detail::Transient::partials, G::out_channels * G::patch);
    float* dxf = dx ? cpu::detail::transient(cpu::detail::Transient::output, batch * G::in_size) : nullptr;
    if (dw) cpu::load_floats(isa, x, xf, batch * G::in_size);
    cpu::load_floats(isa, dy, dyf, batch * G::out_size);
    cpu::load_floats(isa, w, wf, G::out_channels * G::patch);
    im2col_backward<G>(ctx, xf, wf, dyf, dxf, dw, db, batch, accumulate);
    if (dx) cpu::store_floats(isa, dxf, dx, batch * G::in_size);
  }
};

} // namespace cohort::cpu::conv2d_paths
