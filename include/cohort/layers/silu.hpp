#pragma once
/// \file
/// Sigmoid-weighted linear unit (torch.nn.SiLU, "swish"), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/silu"):
///
///     using Net = Sequential<Input<16, 8, 8>, Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, SiLU>;

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `SiLU`: y = x * sigmoid(x) = x / (1 + e^-x). Backward reads the forward input.
struct SiLU {
  static constexpr std::string_view name = "SiLU";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = SiLU;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::ActivationKernels<Backend>::silu_forward(a.ctx, a.x, a.y, a.batch * S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::ActivationKernels<Backend>::silu_backward(a.ctx, a.x, a.dy, a.dx, a.batch * S::size);
    }
  };
};

} // namespace cohort
