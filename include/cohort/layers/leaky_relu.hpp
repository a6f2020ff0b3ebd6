#pragma once
/// \file
/// Leaky rectified linear unit (torch.nn.LeakyReLU), element-wise on any shape.
/// Example (compiled: tests/docs/headers.cpp, "layers/leaky_relu"):
///
///     using Net = Sequential<Input<16, 8, 8>, BatchNorm2d<16>, LeakyReLU<>>;      // slope 0.01
///     using Steep = Sequential<Input<10>, Linear<10, 10>, LeakyReLU<0.2f>>;

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `LeakyReLU<NegativeSlope = 0.01f>`: y = x where x > 0, else NegativeSlope * x; the gradient
/// at 0 is NegativeSlope, as in PyTorch (its backward tests the input: x > 0).
template <float NegativeSlope = 0.01f>
struct LeakyReLU {
  static_assert(NegativeSlope == NegativeSlope, "LeakyReLU: NegativeSlope must be a number, not NaN");

  static constexpr std::string_view name = "LeakyReLU";
  static std::string signature() { return std::string(name) + detail::template_args(NegativeSlope); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;
  static constexpr float negative_slope = NegativeSlope;

  template <class S>
  struct bind : NoTensors {
    using layer = LeakyReLU;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::ActivationKernels<Backend>::leaky_relu_forward(a.ctx, NegativeSlope, a.x, a.y, a.batch * S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx)
        ops::ActivationKernels<Backend>::leaky_relu_backward(a.ctx, NegativeSlope, a.x, a.dy, a.dx, a.batch * S::size);
    }
  };
};

} // namespace cohort
