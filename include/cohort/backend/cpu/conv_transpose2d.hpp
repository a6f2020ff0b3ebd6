#pragma once
/// \file
/// ConvTranspose2d on the CPU, as the three passes of the convolution it transposes (the
/// geometry's `adjoint`), the way cuDNN and torch run it:
///
///     forward   y  = the adjoint's input gradient for output gradient x  (Conv2dKernels backward, dw null)
///     backward  dx = the adjoint's forward pass of dy                     (Conv2dKernels forward, no bias)
///               dw = the adjoint's weight gradient, its input dy and its output gradient x
///
/// so every fast path of conv2d.hpp (direct, strided phases, pointwise, Winograd, bf16 dots)
/// serves it too. The bias is added after the input-gradient pass; for 16-bit storage with a
/// bias that pass runs on float copies, so that the output is rounded once, after the bias (the
/// float kernel plus one rounding, as every 16-bit kernel). The bias gradient is summed per
/// channel in sample order, the same for any thread count.

#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

template <>
struct ops::ConvTranspose2dKernels<Cpu> {
  using Conv = ops::Conv2dKernels<Cpu>;
  /// The adjoint convolution's workspace (its packed weights serve all three passes), and for
  /// 16-bit storage the float copies of a forward pass with bias.
  template <class G, class T>
  struct workspace : Conv::template workspace<typename G::adjoint, T> {
    typename Conv::template workspace<typename G::adjoint, float> in_float;
    HostBuffer<float> x, w, y; // (batch, in_size), (in, out, K, K) then the bias, (batch, out_size)
    void reserve(std::size_t) noexcept {}
  };

  /// y (batch, G::out_size) from x (batch, G::in_size), w (in, out, K, K) and b (out; null: none).
  template <class G, class T>
  static void forward(CpuContext& ctx, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<G, T>& ws) {
    using A = typename G::adjoint;
    if constexpr (cpu::is_half_type<T>) {
      if (b) {
        const Isa isa = cpu::active_isa();
        constexpr std::size_t weights = G::in_channels * G::out_channels * G::kernel * G::kernel;
        ws.x.resize(batch * G::in_size);
        ws.y.resize(batch * G::out_size);
        ws.w.resize(weights + G::out_channels);
        cpu::load_floats(isa, x, ws.x.data(), batch * G::in_size);
        cpu::load_floats(isa, w, ws.w.data(), weights);
        cpu::load_floats(isa, b, ws.w.data() + weights, G::out_channels);
        Conv::template backward<A>(
            ctx, Conv2dBackwardArgs<float>{.w = ws.w.data(), .dy = ws.x.data(), .dx = ws.y.data(), .batch = batch},
            ws.in_float);
        add_bias<G>(ctx, ws.w.data() + weights, ws.y.data(), batch);
        cpu::store_floats(isa, ws.y.data(), y, batch * G::out_size);
        return;
      }
    }
    Conv::template backward<A>(ctx, Conv2dBackwardArgs<T>{.w = w, .dy = x, .dx = y, .batch = batch}, ws);
    if (b) add_bias<G>(ctx, b, y, batch);
  }

  /// Gradients of input, weights and bias (op_arguments.hpp).
  template <class G, class T>
  static void backward(CpuContext& ctx, const ConvTranspose2dBackwardArgs<T>& a, workspace<G, T>& ws) {
    using A = typename G::adjoint;
    if (a.dx) Conv::template forward<A>(ctx, a.dy, a.w, static_cast<const T*>(nullptr), a.dx, a.batch, ws);
    Conv::template backward<A>(
        ctx,
        Conv2dBackwardArgs<T>{.x = a.dy, .w = a.w, .dy = a.x, .dw = a.dw, .batch = a.batch, .accumulate = a.accumulate},
        ws);
    if (a.db) bias_grad<G>(ctx, a.dy, a.db, a.batch, a.accumulate);
  }

 private:
  template <class G, class T>
  static void add_bias(CpuContext& ctx, const T* b, T* y, std::size_t batch) {
    using Acc = accumulator_t<T>;
    ctx.threads().parallel_for(batch * G::out_channels, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) {
        const Acc v = Acc(b[r % G::out_channels]);
        T* p = y + r * G::out_plane;
        for (std::size_t i = 0; i < G::out_plane; ++i) p[i] = T(Acc(p[i]) + v);
      }
    });
  }
  /// db[o] (+)= the sum of dy over samples and pixels, in double, per channel in sample order.
  template <class G, class T>
  static void bias_grad(CpuContext& ctx, const T* dy, accumulator_t<T>* db, std::size_t batch, bool accumulate) {
    using Acc = accumulator_t<T>;
    ctx.threads().parallel_for(G::out_channels, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t o = lo; o < hi; ++o) {
        double s = 0;
        for (std::size_t n = 0; n < batch; ++n) {
          const T* p = dy + (n * G::out_channels + o) * G::out_plane;
          for (std::size_t i = 0; i < G::out_plane; ++i) s += double(Acc(p[i]));
        }
        db[o] = accumulate ? Acc(double(db[o]) + s) : Acc(s);
      }
    });
  }
};

} // namespace cohort
