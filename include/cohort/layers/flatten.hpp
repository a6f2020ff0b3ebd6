#pragma once
/// \file
/// Flattens (C, H, W) samples to vectors of C*H*W features (torch.nn.Flatten with start_dim=1).
/// Example (compiled: tests/docs/headers.cpp, "layers/flatten"):
///
///     using Net = Sequential<Input<32, 12, 12>, Flatten, Linear<4608, 10>>;
///
/// Flatten moves no data: its output aliases its input, so it costs nothing at run time.

#include <string>
#include <string_view>

#include "cohort/layers/layer.hpp"

namespace cohort {

/// `Flatten`: Shape<C, H, W> -> Shape<C*H*W>.
struct Flatten {
  static constexpr std::string_view name = "Flatten";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;

  template <class S>
  struct bind : NoTensors {
    using layer = Flatten;
    using input_shape = S;
    using output_shape = Shape<S::size>;
    /// The executor aliases output to input and skips the calls below.
    static constexpr bool is_view = true;
    template <class Backend, class T>
    using state = NoState;
    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>&, NoState&) {}
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>&, NoState&) {}
  };
};

} // namespace cohort
