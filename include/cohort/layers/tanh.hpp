#pragma once
/// \file
/// Hyperbolic tangent (torch.nn.Tanh), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/tanh"):
///
///     using Net = Sequential<Input<10>, Linear<10, 10>, Tanh>;

#include <cstddef>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/elementwise_activation.hpp"

namespace cohort {

/// `Tanh`: y = tanh(x). Backward reads the forward output, as torch's tanh_backward: dx = dy * (1 - y * y).
struct Tanh : detail::ElementwiseActivation<Tanh> {
  static constexpr std::string_view name = "Tanh";

  template <class Backend, class T>
  static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n) {
    ops::ActivationKernels<Backend>::tanh_forward(ctx, x, y, n);
  }
  template <class Backend, class T>
  static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    (void)x; // from the output, as torch
    ops::ActivationKernels<Backend>::tanh_backward(ctx, y, dy, dx, n);
  }
};

} // namespace cohort
