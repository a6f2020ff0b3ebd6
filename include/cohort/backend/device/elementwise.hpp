#pragma once
/// \file
/// Element-wise ops on a device backend, as Thrust algorithms over host/device functors: ReLU,
/// dropout masks, copies, the host <-> device copies engines use, optimiser rules, and mixed
/// precision's conversions and gradient check.

#include <cstddef>
#include <cstdint>
#include <utility>

#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/gradient_packing.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"
#include "cohort/core/random.hpp"

namespace cohort::device {

namespace detail {
template <class T>
struct Relu {
  COHORT_HOST_DEVICE T operator()(T x) const { return accumulator_t<T>(x) > 0 ? x : T(0); }
};
/// dx = dy where y > 0 (PyTorch's threshold_backward on the output).
template <class T>
struct ReluGrad {
  COHORT_HOST_DEVICE T operator()(T y, T dy) const { return accumulator_t<T>(y) > 0 ? dy : T(0); }
};
/// a + b (then max(., 0) when `relu`), in the accumulator type, rounded once: a residual sum.
template <class T>
struct AddMaybeRelu {
  bool relu;
  COHORT_HOST_DEVICE T operator()(T a, T b) const {
    const accumulator_t<T> s = accumulator_t<T>(a) + accumulator_t<T>(b);
    return T(relu && !(s > 0) ? accumulator_t<T>(0) : s);
  }
};
template <class T>
struct DropoutUnit {
  using A = accumulator_t<T>;
  RandomStream stream;
  GlobalUnits index;
  float p;
  A scale;
  const T* x;
  A* mask;
  T* y;
  std::size_t unit_size;
  COHORT_HOST_DEVICE void operator()(std::size_t u) const {
    const A m = stream.uniform(index(u)) >= p ? scale : A(0);
    mask[u] = m;
    for (std::size_t j = 0; j < unit_size; ++j) y[u * unit_size + j] = T(A(x[u * unit_size + j]) * m);
  }
};
template <class T>
struct MaskMultiply {
  const T* x;
  const accumulator_t<T>* mask;
  T* y;
  std::size_t unit_size;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    y[i] = T(A(x[i]) * mask[i / unit_size]);
  }
};
/// Element i of the copied block (ops::ChannelCopy): sample i / run, offset i % run in it.
template <class T>
struct CopyChannels {
  const T* src;
  T* dst;
  ops::ChannelCopy c;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t run = c.channels * c.plane, n = i / run, r = i % run;
    dst[(n * c.dst_channels + c.dst_first) * c.plane + r] = src[(n * c.src_channels + c.src_first) * c.plane + r];
  }
};
/// y[i] = x[i] * g[i / unit_size]: layers/gated.hpp's gate, broadcast over each plane.
template <class T>
struct ScaleUnits {
  const T* x;
  const T* g;
  T* y;
  std::size_t unit_size;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    y[i] = T(A(x[i]) * A(g[i / unit_size]));
  }
};
/// Its backward for unit u: dg[u] = sum_j dy * x in order, dx = dy * g[u] (dx may be null).
template <class T>
struct ScaleUnitsBackward {
  const T* x;
  const T* g;
  const T* dy;
  T* dx;
  T* dg;
  std::size_t unit_size;
  COHORT_HOST_DEVICE void operator()(std::size_t u) const {
    using A = accumulator_t<T>;
    A sum = 0;
    for (std::size_t j = 0; j < unit_size; ++j) sum += A(dy[u * unit_size + j]) * A(x[u * unit_size + j]);
    dg[u] = T(sum);
    if (dx)
      for (std::size_t j = 0; j < unit_size; ++j) dx[u * unit_size + j] = T(A(dy[u * unit_size + j]) * A(g[u]));
  }
};
template <class From, class To>
struct Convert {
  COHORT_HOST_DEVICE To operator()(From x) const { return To(x); }
};
/// inf or NaN (x - x is 0 for every finite x, NaN otherwise; no <cmath> needed in device code).
struct NonFinite {
  COHORT_HOST_DEVICE bool operator()(float x) const { return !(x - x == 0.f); }
};
struct ScaleBy {
  float factor;
  COHORT_HOST_DEVICE float operator()(float x) const { return x * factor; }
};
/// An optimiser's element rule at index i, with K state arrays.
struct SquareAsDouble {
  COHORT_HOST_DEVICE double operator()(float x) const { return double(x) * double(x); }
};
template <class Rule, class T, std::size_t K>
struct ApplyRule {
  Rule rule;
  T* p;
  const T* g;
  T* state[K > 0 ? K : 1];
  COHORT_HOST_DEVICE void operator()(std::size_t i) const { call(i, std::make_index_sequence<K>{}); }
  template <std::size_t... J>
  COHORT_HOST_DEVICE void call(std::size_t i, std::index_sequence<J...>) const {
    rule(p[i], g[i], state[J][i]...);
  }
};
} // namespace detail

/// ops::ElementwiseKernels for a device backend (its context supplies `policy()`).
template <class Backend>
struct ElementwiseKernels {
  using context = typename Backend::context;

  template <class T>
  static void copy(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::copy_n(ctx.policy(), x, n, y);
  }
  /// y[i] = value, on the context's stream (DeviceBuffer::fill runs on the default one).
  template <class T>
  static void fill(context& ctx, T* y, std::size_t n, T value) {
    thrust::fill_n(ctx.policy(), y, n, value);
  }
  template <class T>
  static void relu_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::Relu<T>{});
  }
  template <class T>
  static void relu_backward(context& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), y, y + n, dy, dx, detail::ReluGrad<T>{});
  }
  /// y = a + b, or max(a + b, 0) when `relu` (a residual block's sum, its ReLU fused).
  template <class T>
  static void add(context& ctx, const T* a, const T* b, T* y, std::size_t n, bool relu) {
    thrust::transform(ctx.policy(), a, a + n, b, y, detail::AddMaybeRelu<T>{relu});
  }
  /// As the CPU backend: unit u is kept when stream.uniform(index(u)) >= p, so masks are the
  /// same on every backend, replica count and world size.
  template <class T>
  static void dropout_forward(context& ctx, RandomStream stream, GlobalUnits index, float p, const T* x,
                              accumulator_t<T>* mask, T* y, std::size_t units, std::size_t unit_size) {
    using A = accumulator_t<T>;
    const A scale = A(1) / (A(1) - A(p));
    for_each_index(ctx.policy(), units, detail::DropoutUnit<T>{stream, index, p, scale, x, mask, y, unit_size});
  }
  /// Host -> device and device -> host copies of raw arrays (engines move batches, scores and
  /// optimiser state with these; DeviceBuffer has its own).
  template <class T>
  static void upload(context& ctx, const T* host, T* device, std::size_t n) {
    if constexpr (requires { ctx.copy_to_device(host, device, n); })
      ctx.copy_to_device(host, device, n); // Cuda: cudaMemcpyAsync on the context's stream
    else
      thrust::copy(host, host + n, thrust::device_pointer_cast(device));
  }
  /// Returns once the values are on the host, after everything queued on the context before.
  template <class T>
  static void download(context& ctx, const T* device, T* host, std::size_t n) {
    if constexpr (requires { ctx.copy_to_host(device, host, n); }) {
      ctx.copy_to_host(device, host, n); // Cuda: on the context's stream, then a wait for it
    } else {
      const auto first = thrust::device_pointer_cast(device);
      thrust::copy(first, first + std::ptrdiff_t(n), host);
    }
  }

  /// Gradient compression (ProcessGroupDDP's device engines; device/gradient_packing.hpp):
  /// wire[i] = g[i] (+ residual[i]) rounded to `c`, the residual keeping what rounding dropped;
  /// and back, exactly.
  static void pack_gradients(context& ctx, GradientCompression c, const float* g, std::uint16_t* wire, std::size_t n,
                             float* residual) {
    device::pack_gradients(ctx.policy(), c, g, wire, n, residual);
  }
  static void unpack_gradients(context& ctx, GradientCompression c, const std::uint16_t* wire, float* g,
                               std::size_t n) {
    device::unpack_gradients(ctx.policy(), c, wire, g, n);
  }

  /// rule(p[i], g[i], state[i]...) for i in [0, n): an optimiser step (the rules of optim/ are
  /// host and device code).
  template <class Rule, class T, class... State>
  static void apply_rule(context& ctx, const Rule& rule, std::size_t n, T* p, const T* g, State*... state) {
    for_each_index(ctx.policy(), n, detail::ApplyRule<Rule, T, sizeof...(State)>{rule, p, g, {state...}});
  }

  /// y[i] = To(x[i]): float <-> half / bfloat16 (round to nearest even), for mixed precision.
  template <class From, class To>
  static void convert(context& ctx, const From* x, To* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::Convert<From, To>{});
  }
  /// Mixed precision before an optimiser step: false when g holds an inf or NaN (the step is
  /// skipped), else g *= factor (the loss scale undone) and true.
  static bool unscale_if_finite(context& ctx, float* g, std::size_t n, float factor) {
    if (thrust::transform_reduce(ctx.policy(), g, g + n, detail::NonFinite{}, false, thrust::logical_or<bool>{}))
      return false;
    thrust::transform(ctx.policy(), g, g + n, g, detail::ScaleBy{factor});
    return true;
  }

  /// Sum of g[i]^2 in double (gradient clipping). One reduction: the same on every device
  /// that reduces the same gradients the same way.
  static double sum_of_squares(context& ctx, const float* g, std::size_t n) {
    return thrust::transform_reduce(ctx.policy(), g, g + n, detail::SquareAsDouble{}, 0.0, thrust::plus<double>{});
  }

  template <class T>
  static void copy_channels(context& ctx, const T* src, T* dst, const ops::ChannelCopy& c) {
    for_each_index(ctx.policy(), c.batch * c.channels * c.plane, detail::CopyChannels<T>{src, dst, c});
  }

  template <class T>
  static void scale_units(context& ctx, const T* x, const T* g, T* y, std::size_t units, std::size_t unit_size) {
    for_each_index(ctx.policy(), units * unit_size, detail::ScaleUnits<T>{x, g, y, unit_size});
  }
  template <class T>
  static void scale_units_backward(context& ctx, const T* x, const T* g, const T* dy, T* dx, T* dg, std::size_t units,
                                   std::size_t unit_size) {
    for_each_index(ctx.policy(), units, detail::ScaleUnitsBackward<T>{x, g, dy, dx, dg, unit_size});
  }

  template <class T>
  static void multiply(context& ctx, const T* x, const accumulator_t<T>* mask, T* y, std::size_t units,
                       std::size_t unit_size) {
    for_each_index(ctx.policy(), units * unit_size, detail::MaskMultiply<T>{x, mask, y, unit_size});
  }
};

} // namespace cohort::device
