#pragma once
/// \file
/// Fully connected layer y = x W^T + b on feature vectors.
/// Example (compiled: tests/docs/headers.cpp, "layers/linear"):
///
///     using Head = Sequential<Input<64>, Linear<64, 10>>;
///
/// State dict: "weight" (Out, In) and "bias" (Out), initialised as torch.nn.Linear.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `Linear<In, Out>`: takes Shape<In> (put a Flatten before it after convolutions).
template <std::size_t In, std::size_t Out>
struct Linear {
  static_assert(In >= 1, "Linear: In must be at least 1");
  static_assert(Out >= 1, "Linear: Out must be at least 1");

  static constexpr std::string_view name = "Linear";
  static std::string signature() { return std::string(name) + detail::template_args(In, Out); }
  using expected_input = expect::Vector<In>;
  template <class S>
  static constexpr bool accepts = ShapeType<S>&& S::rank == 1 && S::size == In;

  template <class S>
  struct bind : NoTensors {
    using layer = Linear;
    using input_shape = S;
    using output_shape = Shape<Out>;
    static constexpr std::size_t in_features = In, out_features = Out;
    static constexpr std::array<TensorSpec, 2> parameters{{
        {"weight", 2, {Out, In}, Init::uniform_fan_in, In},
        {"bias", 1, {Out}, Init::uniform_fan_in, In},
    }};
    static constexpr auto offsets = packed_offsets(parameters);

    template <class Backend, class T>
    using state = typename ops::LinearKernels<Backend>::template workspace<In, Out, T>;

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::LinearKernels<Backend>::template forward<In, Out>(a.ctx, a.x, a.params + offsets[0], a.params + offsets[1],
                                                             a.y, a.batch, ws);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      ops::LinearKernels<Backend>::template backward<In, Out>(a.ctx,
                                                              ops::LinearBackwardArgs<T>{.x = a.x,
                                                                                         .w = a.params + offsets[0],
                                                                                         .dy = a.dy,
                                                                                         .dx = a.dx,
                                                                                         .dw = a.grads + offsets[0],
                                                                                         .db = a.grads + offsets[1],
                                                                                         .batch = a.batch,
                                                                                         .accumulate = a.accumulate},
                                                              ws);
    }
  };
};

} // namespace cohort
