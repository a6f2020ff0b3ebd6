#pragma once
/// \file
/// Logistic sigmoid (torch.nn.Sigmoid), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/sigmoid"):
///
///     using Gate = Sequential<Input<16>, Linear<16, 16>, Sigmoid>;

#include <cstddef>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/elementwise_activation.hpp"

namespace cohort {

/// `Sigmoid`: y = 1 / (1 + e^-x). Backward reads the forward output, as torch's sigmoid_backward: dx = dy * (1 - y) *
/// y.
struct Sigmoid : detail::ElementwiseActivation<Sigmoid> {
  static constexpr std::string_view name = "Sigmoid";

  template <class Backend, class T>
  static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n) {
    ops::ActivationKernels<Backend>::sigmoid_forward(ctx, x, y, n);
  }
  template <class Backend, class T>
  static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    (void)x; // from the output, as torch
    ops::ActivationKernels<Backend>::sigmoid_backward(ctx, y, dy, dx, n);
  }
};

} // namespace cohort
