#pragma once
/// \file
/// Log-softmax over the features of each sample (torch.nn.LogSoftmax(dim=1)); pair it with
/// NllLoss, or leave it out and use CrossEntropyLoss on the raw scores.
/// Example (compiled: tests/docs/headers.cpp, "layers/log_softmax"):
///
///     using Net = Sequential<Input<64>, Linear<64, 10>, LogSoftmax>;

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `LogSoftmax`: y_i = x_i - max(x) - log(sum_j exp(x_j - max(x))).
struct LogSoftmax {
  static constexpr std::string_view name = "LogSoftmax";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyVector;
  template <class S>
  static constexpr bool accepts = ShapeType<S>&& S::rank == 1;

  template <class S>
  struct bind : NoTensors {
    using layer = LogSoftmax;
    using input_shape = S;
    using output_shape = S;
    template <class Backend, class T>
    using state = NoState;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, NoState&) {
      ops::SoftmaxKernels<Backend>::log_softmax_forward(a.ctx, a.x, a.y, a.batch, S::size);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, NoState&) {
      if (a.dx) ops::SoftmaxKernels<Backend>::log_softmax_backward(a.ctx, a.y, a.dy, a.dx, a.batch, S::size);
    }
  };
};

} // namespace cohort
