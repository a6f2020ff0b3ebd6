#pragma once
/// \file
/// Piecewise-linear sigmoid (torch.nn.Hardsigmoid, MobileNetV3's squeeze-and-excitation gate),
/// element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/hardsigmoid"):
///
///     using Gate = Sequential<Input<16>, Linear<16, 16>, Hardsigmoid>;

#include <cstddef>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/elementwise_activation.hpp"

namespace cohort {

/// `Hardsigmoid`: y = min(max(x + 3, 0), 6) / 6. The gradient is dy / 6 for -3 < x < 3, else 0 (0 at the kinks, as
/// torch's).
struct Hardsigmoid : detail::ElementwiseActivation<Hardsigmoid> {
  static constexpr std::string_view name = "Hardsigmoid";

  template <class Backend, class T>
  static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n) {
    ops::ActivationKernels<Backend>::hardsigmoid_forward(ctx, x, y, n);
  }
  template <class Backend, class T>
  static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    (void)y; // the gradient is chosen by the input
    ops::ActivationKernels<Backend>::hardsigmoid_backward(ctx, x, dy, dx, n);
  }
};

} // namespace cohort
