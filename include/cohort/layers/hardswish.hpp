#pragma once
/// \file
/// x * Hardsigmoid(x) (torch.nn.Hardswish, MobileNetV3's activation), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/hardswish"):
///
///     using Block = Sequential<Input<16, 8, 8>, Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, Hardswish>;

#include <cstddef>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/detail/elementwise_activation.hpp"

namespace cohort {

/// `Hardswish`: y = x * min(max(x + 3, 0), 6) / 6. The gradient is torch's: 0 for x <= -3,
/// dy * (x / 3 + 0.5) for -3 < x < 3, dy from 3 on (at the kinks: dx(-3) = 0, dx(3) = dy).
struct Hardswish : detail::ElementwiseActivation<Hardswish> {
  static constexpr std::string_view name = "Hardswish";

  template <class Backend, class T>
  static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n) {
    ops::ActivationKernels<Backend>::hardswish_forward(ctx, x, y, n);
  }
  template <class Backend, class T>
  static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
    (void)y; // torch's hardswish_backward reads the input
    ops::ActivationKernels<Backend>::hardswish_backward(ctx, x, dy, dx, n);
  }
};

} // namespace cohort
