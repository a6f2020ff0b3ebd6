#pragma once
/// \file
/// The bound form the parameter-free element-wise activations share (ReLU6, Hardsigmoid,
/// Hardswish, Sigmoid, Tanh): any shape in, the same shape out, no tensors, no state; the layer
/// names its backend kernels. Example of a layer built on it (layers/sigmoid.hpp):
///
///     struct Sigmoid : detail::ElementwiseActivation<Sigmoid> {
///       static constexpr std::string_view name = "Sigmoid";
///       template <class Backend, class T>
///       static void run_forward(typename Backend::context& ctx, const T* x, T* y, std::size_t n);
///       template <class Backend, class T> // x: forward input, y: forward output
///       static void run_backward(typename Backend::context& ctx, const T* x, const T* y, const T* dy, T* dx,
///                                std::size_t n);
///     };

#include <cstddef>
#include <string>

#include "cohort/layers/layer.hpp"

namespace cohort::detail {

/// CRTP base of a parameter-free element-wise activation `Layer` (see the file comment).
template <class Layer>
struct ElementwiseActivation {
  static std::string signature() { return std::string(Layer::name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = Layer;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      Layer::template run_forward<Backend>(a.ctx, a.x, a.y, a.batch * S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) Layer::template run_backward<Backend>(a.ctx, a.x, a.y, a.dy, a.dx, a.batch * S::size);
    }
  };
};

} // namespace cohort::detail
