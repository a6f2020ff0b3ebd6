#pragma once
/// \file
/// Element-wise activations on a device backend (SiLU, GELU, LeakyReLU, ReLU6, Hardsigmoid,
/// Hardswish, Sigmoid, Tanh), as Thrust transforms
/// over host/device functors. The formulas and operation order of the CPU backend and PyTorch
/// (aten/src/ATen/native/cpu/Activation.cpp), in the accumulator type (float for the 16-bit
/// storage types, rounded once on store), with the device's expf and erfcf.

#include <cstddef>

#include <thrust/transform.h>

#include "cohort/backend/device/math.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// Phi(x) = 0.5 * (1 + erf(x / sqrt(2))) = 0.5 * erfc(-x / sqrt(2)) (no cancellation below 0).
template <class A>
COHORT_HOST_DEVICE A normal_cdf(A x) {
  return A(0.5) * math::erfc(-x * A(0.70710678118654752440));
}

template <class T>
struct SiluForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return T(x / (A(1) + math::exp(-x)));
  }
};
template <class T>
struct SiluBackward {
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    const A x = A(xt), s = A(1) / (A(1) + math::exp(-x));
    return T(A(dyt) * s * (A(1) + x * (A(1) - s)));
  }
};
template <class T>
struct GeluForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return T(x * normal_cdf(x));
  }
};
template <class T>
struct GeluBackward {
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    const A pdf = math::exp(x * x * A(-0.5)) * A(0.39894228040143267794); // 1 / sqrt(2 pi)
    return T(A(dyt) * (normal_cdf(x) + x * pdf));
  }
};
template <class T>
struct LeakyReluForward {
  float slope;
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return x > A(0) ? xt : T(x * A(slope));
  }
};
/// The gradient is chosen by the input (x > 0), as PyTorch's leaky_relu_backward.
template <class T>
struct LeakyReluBackward {
  float slope;
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    return A(xt) > A(0) ? dyt : T(A(dyt) * A(slope));
  }
};
/// ReLU6 (hardtanh(x, 0, 6)); its gradient is 0 at and beyond the kinks, as torch's.
template <class T>
struct Relu6Forward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return x < A(0) ? T(A(0)) : x > A(6) ? T(A(6)) : xt;
  }
};
template <class T>
struct Relu6Backward {
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return (x <= A(0) || x >= A(6)) ? T(A(0)) : dyt;
  }
};
/// min(max(x + 3, 0), 6): Hardsigmoid's and Hardswish's clamp.
template <class A>
COHORT_HOST_DEVICE A relu6_of_x_plus_3(A x) {
  const A s = x + A(3);
  return s < A(0) ? A(0) : s > A(6) ? A(6) : s;
}
template <class T>
struct HardsigmoidForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    return T(relu6_of_x_plus_3(A(xt)) / A(6));
  }
};
template <class T>
struct HardsigmoidBackward {
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return (x > A(-3) && x < A(3)) ? T(A(dyt) * (A(1) / A(6))) : T(A(0));
  }
};
template <class T>
struct HardswishForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return T(x * relu6_of_x_plus_3(x) / A(6));
  }
};
/// The kinks take the outer pieces (dx(-3) = 0, dx(3) = dy), as torch's hardswish_backward.
template <class T>
struct HardswishBackward {
  COHORT_HOST_DEVICE T operator()(T xt, T dyt) const {
    using A = accumulator_t<T>;
    const A x = A(xt);
    return x <= A(-3) ? T(A(0)) : x < A(3) ? T(A(dyt) * (x / A(3) + A(0.5))) : dyt;
  }
};
template <class T>
struct SigmoidForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    return T(A(1) / (A(1) + math::exp(-A(xt))));
  }
};
/// From the forward output y, as torch's sigmoid_backward.
template <class T>
struct SigmoidBackward {
  COHORT_HOST_DEVICE T operator()(T yt, T dyt) const {
    using A = accumulator_t<T>;
    const A y = A(yt);
    return T(A(dyt) * (A(1) - y) * y);
  }
};
template <class T>
struct TanhForward {
  COHORT_HOST_DEVICE T operator()(T xt) const {
    using A = accumulator_t<T>;
    return T(math::tanh(A(xt)));
  }
};
/// From the forward output y, as torch's tanh_backward.
template <class T>
struct TanhBackward {
  COHORT_HOST_DEVICE T operator()(T yt, T dyt) const {
    using A = accumulator_t<T>;
    const A y = A(yt);
    return T(A(dyt) * (A(1) - y * y));
  }
};
} // namespace detail

/// ops::ActivationKernels for a device backend (its context supplies `policy()`).
template <class Backend>
struct ActivationKernels {
  using context = typename Backend::context;

  template <class T>
  static void silu_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::SiluForward<T>{});
  }
  template <class T>
  static void silu_backward(context& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::SiluBackward<T>{});
  }
  template <class T>
  static void gelu_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::GeluForward<T>{});
  }
  template <class T>
  static void gelu_backward(context& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::GeluBackward<T>{});
  }
  template <class T>
  static void leaky_relu_forward(context& ctx, float slope, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::LeakyReluForward<T>{slope});
  }
  template <class T>
  static void leaky_relu_backward(context& ctx, float slope, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::LeakyReluBackward<T>{slope});
  }
  template <class T>
  static void relu6_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::Relu6Forward<T>{});
  }
  template <class T>
  static void relu6_backward(context& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::Relu6Backward<T>{});
  }
  template <class T>
  static void hardsigmoid_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::HardsigmoidForward<T>{});
  }
  template <class T>
  static void hardsigmoid_backward(context& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::HardsigmoidBackward<T>{});
  }
  template <class T>
  static void hardswish_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::HardswishForward<T>{});
  }
  template <class T>
  static void hardswish_backward(context& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, dy, dx, detail::HardswishBackward<T>{});
  }
  template <class T>
  static void sigmoid_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::SigmoidForward<T>{});
  }
  template <class T>
  static void sigmoid_backward(context& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), y, y + n, dy, dx, detail::SigmoidBackward<T>{});
  }
  template <class T>
  static void tanh_forward(context& ctx, const T* x, T* y, std::size_t n) {
    thrust::transform(ctx.policy(), x, x + n, y, detail::TanhForward<T>{});
  }
  template <class T>
  static void tanh_backward(context& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    thrust::transform(ctx.policy(), y, y + n, dy, dx, detail::TanhBackward<T>{});
  }
};

} // namespace cohort::device
