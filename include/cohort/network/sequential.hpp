#pragma once
/// \file
/// Compile-time composition of layers into a statically shaped network.
/// Example (compiled: tests/docs/headers.cpp, "network/sequential"):
///
///     using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU, MaxPool2d<2>, Flatten,
///                            Linear<2704, 10>, LogSoftmax>;
///     static_assert(std::is_same_v<Net::output_shape, Shape<10>>);
///     static_assert(Net::parameter_count == 27'210);
///
/// A Sequential is a description: it holds no data. `Network<Net>` (network/network.hpp) makes a
/// runnable instance. Every layer is bound to the shape its predecessor produces; a layer that
/// cannot take that shape is a compile error naming its position, the layer and both shapes.
/// Tensor names follow torch.nn.Sequential's state_dict ("0.weight", "3.running_mean").

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "cohort/core/shape.hpp"
#include "cohort/detail/type_list.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// The three stores a network's tensors live in.
enum class TensorKind : std::uint8_t { parameter, buffer, counter };

/// A tensor of a network: which layer owns it, its spec, which store, and its offset there.
struct LayoutEntry {
  std::size_t layer = 0;
  TensorSpec spec{};
  TensorKind kind = TensorKind::parameter;
  std::size_t offset = 0;

  /// The state_dict key, "3.running_mean".
  std::string name() const { return std::to_string(layer) + "." + std::string(spec.name); }
};

namespace detail {

/// Where a chain of layers sits, for compile errors: at the top of a Sequential, or in a branch
/// of a block (`in_block<3, branch::body, in_sequential>`: the body of the block at position 3).
struct in_sequential {};
template <std::size_t BlockIndex, class Branch, class Outer>
struct in_block {};

/// Fails with a message naming the layer position; the instantiation note shows the layer, the
/// shape it received (Produced) and what it takes (Expected), and, inside a block (Where), the
/// block's position and branch.
template <class Where, std::size_t Index, class LayerType, class Produced, class Expected>
constexpr bool check_link() {
  if constexpr (!Layer<LayerType>) {
    if constexpr (std::is_same_v<Where, in_sequential>)
      static_assert(Layer<LayerType>,
                    "Sequential: argument Index (after the Input) is not a layer: it needs name, signature() and "
                    "expected_input (see layers/layer.hpp)");
    else
      static_assert(Layer<LayerType>,
                    "Residual: argument Index of a branch (Where: the block's position and branch) is not a layer: "
                    "it needs name, signature() and expected_input (see layers/layer.hpp)");
    return false;
  } else {
    if constexpr (std::is_same_v<Where, in_sequential>)
      static_assert(LayerType::template accepts<Produced>,
                    "Sequential: layer Index cannot take the output of the layer before it; compare Produced "
                    "(the shape it receives) with Expected (the shape it takes) in the note below");
    else
      static_assert(LayerType::template accepts<Produced>,
                    "Residual: layer Index of a branch cannot take the output of the layer before it (the block's "
                    "input for layer 0); Where names the block's position and the branch; compare Produced (the "
                    "shape it receives) with Expected (the shape it takes) in the note below");
    return LayerType::template accepts<Produced>;
  }
}

template <bool Ok, class Where, std::size_t I, class Produced, class... Ls>
struct chain_step;

/// What a layer takes, or void for a type that is not a layer (check_link then reports it).
template <class L>
struct expected_input_of {
  using type = void;
};
template <Layer L>
struct expected_input_of<L> {
  using type = typename L::expected_input;
};

/// Layer L bound to shape In at position I of the chain at Where: L::bind_at<Where, I, In> for
/// layers that name their position in their own errors (blocks), else L::bind<In>.
template <class L, class Where, std::size_t I, class In>
struct bind_of {
  using type = typename L::template bind<In>;
};
template <class L, class Where, std::size_t I, class In>
requires requires { typename L::template bind_at<Where, I, In>; }
struct bind_of<L, Where, I, In> {
  using type = typename L::template bind_at<Where, I, In>;
};

/// Binds layers left to right; stops at the first link that fails.
template <class Where, std::size_t I, class Produced, class... Ls>
struct chain {
  using bound = type_list<>;
  using output = Produced;
};
template <class Where, std::size_t I, class Produced, class L, class... Rest>
struct chain<Where, I, Produced, L, Rest...>
    : chain_step<check_link<Where, I, L, Produced, typename expected_input_of<L>::type>(), Where, I, Produced, L,
                 Rest...> {};

template <class Where, std::size_t I, class Produced, class L, class... Rest>
struct chain_step<true, Where, I, Produced, L, Rest...> {
  using head = typename bind_of<L, Where, I, Produced>::type;
  using next = chain<Where, I + 1, typename head::output_shape, Rest...>;
  using bound = typename prepend<head, typename next::bound>::type;
  using output = typename next::output;
};
template <class Where, std::size_t I, class Produced, class L, class... Rest>
struct chain_step<false, Where, I, Produced, L, Rest...> {
  using bound = type_list<>;
  using output = InvalidShape;
};

template <class B>
constexpr bool is_view_layer() {
  if constexpr (requires { B::is_view; })
    return B::is_view;
  else
    return false;
}

/// Values a training forward keeps of layer B for backward: its output (none for a view layer
/// such as Flatten), plus, for a block, its branches' (B::inner_activations).
template <class B>
constexpr std::size_t kept_activations() {
  if constexpr (is_view_layer<B>()) {
    return 0;
  } else {
    std::size_t n = B::output_shape::size;
    if constexpr (requires { B::inner_activations; }) n += B::inner_activations;
    return n;
  }
}
template <class List>
struct activation_count;
template <class... Bs>
struct activation_count<type_list<Bs...>> {
  static constexpr std::size_t value = (kept_activations<Bs>() + ... + 0);
};

template <std::size_t N>
constexpr std::size_t spec_sum(const std::array<TensorSpec, N>& a) {
  std::size_t s = 0;
  for (const auto& t : a) s += t.size();
  return s;
}

/// Where every tensor of a network lives in the flat stores.
template <std::size_t Layers, std::size_t Tensors>
struct layout_tables {
  std::array<LayoutEntry, Tensors> entries{};
  // Start of each layer's slice in each store; [Layers] is the padded size of the store.
  std::array<std::size_t, Layers + 1> param_base{}, buffer_base{}, counter_base{};
};

template <class... Bs>
constexpr auto make_layout() {
  constexpr std::size_t tensors = ((Bs::parameters.size() + Bs::buffers.size() + Bs::counters.size()) + ... + 0);
  layout_tables<sizeof...(Bs), tensors> t{};
  std::size_t e = 0, p = 0, b = 0, c = 0, li = 0;
  auto add = [&](const auto& specs, TensorKind kind, std::size_t& cursor, std::size_t align) {
    for (const auto& s : specs) {
      t.entries[e++] = LayoutEntry{li, s, kind, cursor};
      cursor = round_up(cursor + s.size(), align);
    }
  };
  (
      [&] {
        t.param_base[li] = p;
        t.buffer_base[li] = b;
        t.counter_base[li] = c;
        // state_dict order within a module: parameters, then buffers (counters are buffers too)
        add(Bs::parameters, TensorKind::parameter, p, tensor_alignment);
        add(Bs::buffers, TensorKind::buffer, b, tensor_alignment);
        add(Bs::counters, TensorKind::counter, c, 1);
        ++li;
      }(),
      ...);
  t.param_base[li] = p;
  t.buffer_base[li] = b;
  t.counter_base[li] = c;
  return t;
}

template <class List>
struct layout;
template <class... Bs>
struct layout<type_list<Bs...>> {
  static constexpr auto value = make_layout<Bs...>();
  static constexpr std::size_t parameter_count = (spec_sum(Bs::parameters) + ... + 0);
};

} // namespace detail

namespace detail {
/// A chain of layers bound one after another from `InputShape`, with its tensor layout: what
/// a Sequential is, and what each branch of a block (layers/residual.hpp) is.
template <class Where, class InputShape, class... Layers>
struct layer_chain {
  using input_shape = InputShape;
  using chain_type = chain<Where, 0, input_shape, Layers...>;
  /// The bound layers, in order (a detail::type_list).
  using layers = typename chain_type::bound;
  using output_shape = typename chain_type::output;

  static constexpr std::size_t layer_count = sizeof...(Layers);
  using layout_type = ::cohort::detail::layout<layers>;
  static constexpr auto layout = layout_type::value;
  /// Trainable scalars, as sum(p.numel() for p in model.parameters()).
  static constexpr std::size_t parameter_count = layout_type::parameter_count;
  /// Sizes of the flat stores, padding included.
  static constexpr std::size_t parameter_store_size = layout.param_base[layer_count];
  static constexpr std::size_t buffer_store_size = layout.buffer_base[layer_count];
  static constexpr std::size_t counter_store_size = layout.counter_base[layer_count];
};

/// A Sequential's chain: from its Input, or (not an Input: Sequential's static_assert says so)
/// an empty chain, so nothing else is reported.
template <class InputDecl, class... Layers>
struct sequential_chain {
  using type = layer_chain<in_sequential, Shape<1>>;
};
template <std::size_t... E, class... Layers>
struct sequential_chain<Input<E...>, Layers...> {
  using type = layer_chain<in_sequential, Shape<E...>, Layers...>;
};
} // namespace detail

/// `Sequential<Input<...>, Layer0, Layer1, ...>`: the network description.
template <class InputDecl, class... Layers>
struct Sequential : detail::sequential_chain<InputDecl, Layers...>::type {
  static_assert(detail::is_input<InputDecl>::value,
                "Sequential: the first argument must declare the input, e.g. Input<1, 28, 28>");
  static_assert(sizeof...(Layers) > 0, "Sequential: give at least one layer after the Input");

  using base = typename detail::sequential_chain<InputDecl, Layers...>::type;
  using typename base::input_shape;
  using typename base::layers;
  using typename base::output_shape;

  /// One line per layer: index, signature, input and output shape. Two networks are the same
  /// (same layers, hyperparameters and shapes) exactly when their signatures are equal.
  static std::string signature() {
    std::string s = "Sequential<Input<" + input_shape::str() + ">";
    std::size_t i = 0;
    ((s += "; " + std::to_string(i++) + ":" + Layers::signature()), ...);
    return s + "> -> " + output_shape::str();
  }
};

namespace detail {
template <class T>
struct is_sequential : std::false_type {};
template <class I, class... Ls>
struct is_sequential<Sequential<I, Ls...>> : std::true_type {};
} // namespace detail

/// A complete, well-formed network description.
template <class N>
concept NetworkDescription = detail::is_sequential<N>::value && ShapeType<typename N::output_shape>;

/// A well-formed chain of bound layers with its layout: a Sequential or a branch of a block.
/// What the executor and the flat stores need.
template <class N>
concept ChainDescription = requires {
  typename N::layers;
  N::layout;
  N::layer_count;
  N::parameter_store_size;
}
&&ShapeType<typename N::input_shape>&& ShapeType<typename N::output_shape>;

} // namespace cohort
