#pragma once
/// \file
/// Rectified linear unit, element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/relu"):
///
///     using Net = Sequential<Input<10>, Linear<10, 10>, ReLU>;

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `ReLU`: y = max(x, 0); the gradient at 0 is 0, as in PyTorch.
struct ReLU {
  static constexpr std::string_view name = "ReLU";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = ReLU;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::ElementwiseKernels<Backend>::relu_forward(a.ctx, a.x, a.y, a.batch * S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::ElementwiseKernels<Backend>::relu_backward(a.ctx, a.y, a.dy, a.dx, a.batch * S::size);
    }
  };
};

} // namespace cohort
