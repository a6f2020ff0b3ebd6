#pragma once
/// \file
/// Gated blocks: a layer whose output is x * gate(x), the gate a branch that maps the block's
/// (C, H, W) input to one value per channel (C, 1, 1), broadcast over H x W. Squeeze-and-
/// excitation (Hu et al.; MobileNetV3's and EfficientNet's blocks) is the common gate: global
/// average pooling, a 1x1 convolution down, an activation, a 1x1 convolution up, a sigmoid.
/// Example (compiled: tests/docs/headers.cpp, "layers/gated"):
///
///     using SE = Gated<Branch<AdaptiveAvgPool2d<1>, Conv2d<32, 8, 1>, ReLU, Conv2d<8, 32, 1>, Hardsigmoid>>;
///     using Net = Sequential<Input<32, 14, 14>, Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU, SE>;
///
/// (layers/squeeze_excitation.hpp's SqueezeExcitation<C, Squeeze> spells that gate.) Tensors are named as the PyTorch
/// module `Gated(gate)` of tests/reference/cohort_modules.py names them: "4.gate.1.weight", so
/// `load_state_dict(strict=True)` works both ways. Blocks nest: a Gated block may sit in a
/// Residual's branch and hold blocks in its gate. A gate layer that cannot take its input, or a
/// gate that does not end in (C, 1, 1), is a compile error naming the block's position and both
/// shapes.
///
/// Backward: d x = dy * g + gate's input gradient for dg, with dg[n, c] = sum over the plane of
/// dy * x (summed in order: the same for any thread count).

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"
#include "cohort/layers/residual.hpp" // Branch, the branch tensors' renaming
#include "cohort/network/executor.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/batch.hpp"

namespace cohort {

template <class Gate>
struct Gated;

namespace detail {

/// The gate's branch name in tensor names ("gate.1.weight").
struct gate_branch_names {
  static constexpr std::string_view first = "gate", second = "";
};

/// Fails unless a gate maps the block's input In = (C, H, W) to (C, 1, 1); the note shows the
/// block (its position BlockIndex in the chain at Where), its input and the gate's output.
template <class Where, std::size_t BlockIndex, class In, class GateShape>
constexpr bool check_gate_shape() {
  if constexpr (!ShapeType<GateShape>) {
    return false; // a gate layer already failed and said why
  } else {
    constexpr bool ok = std::is_same_v<GateShape, Shape<In::extents[0], 1, 1>>;
    static_assert(ok,
                  "Gated: the gate of the block at BlockIndex (in the chain at Where) must map the block's input In "
                  "(C, H, W) to one value per channel, Shape<C, 1, 1>; it produces GateShape (both in the note "
                  "below). End it with 1x1 convolutions to C channels after AdaptiveAvgPool2d<1>, as "
                  "SqueezeExcitation (layers/squeeze_excitation.hpp) does");
    return ok;
  }
}

/// The bound block: Gated<Branch<GateLayers...>> at position I of the chain at Where, on input In.
template <class Block, class Where, std::size_t I, class In, class... GateLayers>
struct bound_gated {
  using gate_chain = layer_chain<in_block<I, branch::gate, Where>, In, GateLayers...>;
  using gate_shape = typename gate_chain::output_shape;
  static constexpr bool ok = check_gate_shape<Where, I, In, gate_shape>();
  static constexpr std::size_t channels = In::extents[0], plane = In::extents[1] * In::extents[2];

  using layer = Block;
  using input_shape = In;
  using output_shape = std::conditional_t<ok, In, InvalidShape>;
  /// Values per sample the gate keeps for backward (Network::activation_bytes).
  static constexpr std::size_t inner_activations = activation_count<typename gate_chain::layers>::value;

  static constexpr auto parameters = branch_tensors<gate_chain, void, TensorKind::parameter, gate_branch_names>::specs;
  static constexpr auto buffers = branch_tensors<gate_chain, void, TensorKind::buffer, gate_branch_names>::specs;
  static constexpr auto counters = branch_tensors<gate_chain, void, TensorKind::counter, gate_branch_names>::specs;

  // The block's slice of each store is the gate's layout (checked, as Residual checks its own).
  static constexpr bool same_layout = [] {
    const auto params = packed_offsets(parameters);
    const auto bufs = packed_offsets(buffers);
    std::size_t p = 0, b = 0;
    return chain_tensors_in_place<gate_chain>(params, bufs, p, b);
  }();
  static_assert(same_layout, "Gated: internal error: the block's tensors are not where its gate looks");

  template <class Backend, class T>
  struct state {
    Executor<gate_chain, T, Backend> gate;
    const T* g = nullptr;                           // the gate's output of the last forward
    typename Backend::template buffer<T> dg;        // d loss / d gate output
    typename Backend::template buffer<T> scaled_dy; // dy * g: the input gradient through the product
    void reserve(std::size_t batch) { gate.reserve(batch); }
  };

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& st) {
    st.gate.set_index_base((a.index + 1) * 64); // dropout streams of its own, as a Residual's body
    st.g = st.gate
               .forward(a.ctx, a.step, StorePointers<T>{a.params, a.buffers, a.counters, a.master},
                        ConstBatchView<In, T>(a.x, a.batch))
               .data();
    ops::ElementwiseKernels<Backend>::scale_units(a.ctx, a.x, st.g, a.y, a.batch * channels, plane);
  }

  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& st) {
    using K = ops::ElementwiseKernels<Backend>;
    const std::size_t units = a.batch * channels, n = a.batch * In::size;
    if (st.dg.size() < units) st.dg.resize(units);
    T* through_product = nullptr;
    if (a.dx) {
      if (st.scaled_dy.size() < n) st.scaled_dy.resize(n);
      through_product = st.scaled_dy.data();
    }
    K::scale_units_backward(a.ctx, a.x, st.g, a.dy, through_product, st.dg.data(), units, plane);
    const BackwardOptions o{.accumulate = a.accumulate, .input_grad = a.dx != nullptr};
    // Backward reads the running statistics only; StorePointers holds them mutable for forward.
    auto* buffers = const_cast<accumulator_t<T>*>(a.buffers);
    const T* through_gate = st.gate
                                .backward(a.ctx, StorePointers<T>{a.params, buffers, nullptr, a.master}, a.grads,
                                          ConstBatchView<gate_shape, T>(st.dg.data(), a.batch), o)
                                .data();
    if (a.dx) K::add(a.ctx, through_product, through_gate, a.dx, n, false);
  }
};

} // namespace detail

/// `Gated<Branch<Layers...>>`: x * gate(x), the gate's (C, 1, 1) output broadcast over H x W.
template <class... GateLayers>
struct Gated<Branch<GateLayers...>> {
  static_assert(sizeof...(GateLayers) > 0, "Gated: the gate needs at least one layer");

  static constexpr std::string_view name = "Gated";
  static std::string signature() { return "Gated<gate=" + detail::branch_signature<GateLayers...>() + ">"; }
  using expected_input = expect::AnyImage;
  template <class In>
  static constexpr bool accepts = ImageShape<In>;

  /// Bound at position I of the chain at Where (so that errors inside name the block).
  template <class Where, std::size_t I, class In>
  using bind_at = detail::bound_gated<Gated, Where, I, In, GateLayers...>;
  template <class In>
  using bind = bind_at<detail::in_sequential, 0, In>;
};

} // namespace cohort
