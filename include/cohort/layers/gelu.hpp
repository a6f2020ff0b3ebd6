#pragma once
/// \file
/// Gaussian error linear unit (torch.nn.GELU with approximate='none'), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/gelu"):
///
///     using Head = Sequential<Input<256>, Linear<256, 256>, GELU, Linear<256, 10>>;

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `GELU`: y = x * Phi(x) = x * 0.5 * (1 + erf(x / sqrt(2))), the exact (erf) form, not the tanh
/// approximation. Backward reads the forward input: dx = dy * (Phi(x) + x * phi(x)).
struct GELU {
  static constexpr std::string_view name = "GELU";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = GELU;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::ActivationKernels<Backend>::gelu_forward(a.ctx, a.x, a.y, a.batch * S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::ActivationKernels<Backend>::gelu_backward(a.ctx, a.x, a.dy, a.dx, a.batch * S::size);
    }
  };
};

} // namespace cohort
