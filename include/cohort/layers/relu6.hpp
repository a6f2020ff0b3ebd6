#pragma once
/// \file
/// ReLU clipped at 6 (torch.nn.ReLU6, MobileNetV2's activation), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/relu6"):
///
///     using Block = Sequential<Input<16, 8, 8>, Conv2d<16, 32, 1, 1, 0, false>, BatchNorm2d<32>, ReLU6>;

#include <cstddef>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/elementwise_activation.hpp"

namespace cohort {

/// `ReLU6`: y = min(max(x, 0), 6). The gradient is 0 at x = 0 and x = 6 as well as beyond them (torch's
/// hardtanh_backward: `x <= 0 || x >= 6`).
struct ReLU6 : detail::ElementwiseActivation<ReLU6> {
  static constexpr std::string_view name = "ReLU6";

  template <class Backend, class T>
  static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n) {
    ops::ActivationKernels<Backend>::relu6_forward(ctx, x, y, n);
  }
  template <class Backend, class T>
  static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    (void)y; // the gradient is chosen by the input
    ops::ActivationKernels<Backend>::relu6_backward(ctx, x, dy, dx, n);
  }
};

} // namespace cohort
