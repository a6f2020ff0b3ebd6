#pragma once
/// \file
/// Residual blocks: a layer whose output is body(x) + shortcut(x), each branch a list of layers
/// bound to the block's input shape, so a ResNet is a Sequential of blocks.
/// Example (compiled: tests/docs/headers.cpp, "layers/residual"):
///
///     using Basic = Residual<Branch<Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, ReLU,
///                                   Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>>>;    // identity shortcut
///     using Down = Residual<Branch<Conv2d<16, 32, 3, 2, 1, false>, BatchNorm2d<32>, ReLU,
///                                  Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>>,
///                           Branch<Conv2d<16, 32, 1, 2, 0, false>, BatchNorm2d<32>>>;     // projection
///     using Net = Sequential<Input<16, 28, 28>, Basic, ReLU, Down, ReLU>;
///
/// Tensors are named as the PyTorch module `Residual(body, shortcut)` of
/// tests/reference/cohort_modules.py names them: "3.body.0.weight", "3.shortcut.1.running_mean"
/// (no "shortcut" tensors for the identity), so `load_state_dict(strict=True)` works both ways.
/// Blocks nest: a branch may hold blocks. A layer of a branch that cannot take its input, or a
/// body and shortcut of different shapes, is a compile error naming the block's position, the
/// branch, the layer's position in it and both shapes.
///
/// A block runs each branch with an Executor of its own over its slice of the network's stores
/// (the branch's layers fuse as in any network), then adds them; a ReLU after the block is
/// applied inside the sum. Dropout inside a branch draws from streams of its own: branch layer j
/// of the block at position i reports position (i + 1) * 64 + j (body) or + 32 + j (shortcut).

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/batch.hpp"

namespace cohort {

/// The layers of one branch of a Residual block, in order, without an Input: they are bound to
/// the block's input shape.
template <class... Layers>
struct Branch {};

/// The shortcut that passes a block's input through unchanged (the default).
struct Identity {};

/// Tags naming a block's branch in compile errors (`Where = in_block<3, branch::body, ...>`).
namespace branch {
struct body {};
struct shortcut {};
struct gate {}; // layers/gated.hpp's
} // namespace branch

template <class Body, class Shortcut = Identity>
struct Residual;

namespace detail {

/// A tensor name built at compile time ("body.0.weight"), held in static storage.
struct tensor_name {
  char text[128]{};
  std::size_t size = 0;
  constexpr void append(std::string_view s) {
    for (char c : s) text[size++] = c;
  }
  constexpr void append_number(std::size_t n) {
    char digits[20]{};
    std::size_t k = 0;
    do {
      digits[k++] = char('0' + n % 10);
      n /= 10;
    } while (n);
    while (k) text[size++] = digits[--k];
  }
  constexpr std::string_view view() const { return {text, size}; }
};

/// How many tensors of `kind` chain C holds.
template <class C>
constexpr std::size_t count_of(TensorKind kind) {
  std::size_t n = 0;
  for (const LayoutEntry& e : C::layout.entries) n += e.kind == kind;
  return n;
}
/// Whether a block's tensors, whose packed offsets in the block's slices are `params` and `bufs`,
/// lie from ordinals p and b on where chain C's own layout puts them, shifted by the bases; p and
/// b move past C's tensors. (Network's packing should put them there; Residual and Gated check
/// it rather than trust it.)
template <class C, class ParamOffsets, class BufferOffsets>
constexpr bool chain_tensors_in_place(const ParamOffsets& params, const BufferOffsets& bufs, std::size_t& p,
                                      std::size_t& b, std::size_t param_base = 0, std::size_t buffer_base = 0) {
  for (const LayoutEntry& e : C::layout.entries) {
    if (e.kind == TensorKind::parameter && params[p++] != param_base + e.offset) return false;
    if (e.kind == TensorKind::buffer && bufs[b++] != buffer_base + e.offset) return false;
  }
  return true;
}

/// A residual block's branch names in tensor names ("body.0.weight", "shortcut.1.bias").
struct residual_branch_names {
  static constexpr std::string_view first = "body", second = "shortcut";
};

/// The tensors of `kind` of the first chain B then the second chain S (void: none), renamed
/// "<first>.<layer>.<name>" / "<second>.<layer>.<name>" (Names: residual_branch_names or a
/// struct like it): their names, then their specs.
template <class B, class S, TensorKind Kind, class Names = residual_branch_names>
struct branch_tensors {
  static constexpr std::size_t body_count = count_of<B>(Kind);
  static constexpr std::size_t shortcut_count = [] {
    if constexpr (std::is_void_v<S>)
      return std::size_t(0);
    else
      return count_of<S>(Kind);
  }();
  static constexpr std::size_t count = body_count + shortcut_count;

  static constexpr std::array<tensor_name, count> names = [] {
    std::array<tensor_name, count> out{};
    std::size_t i = 0;
    const auto add = [&](const auto& entries, std::string_view branch) {
      for (const LayoutEntry& e : entries)
        if (e.kind == Kind) {
          out[i].append(branch);
          out[i].append(".");
          out[i].append_number(e.layer);
          out[i].append(".");
          out[i].append(e.spec.name);
          ++i;
        }
    };
    add(B::layout.entries, Names::first);
    if constexpr (!std::is_void_v<S>) add(S::layout.entries, Names::second);
    return out;
  }();

  static constexpr std::array<TensorSpec, count> specs = [] {
    std::array<TensorSpec, count> out{};
    std::size_t i = 0;
    const auto add = [&](const auto& entries) {
      for (const LayoutEntry& e : entries)
        if (e.kind == Kind) {
          out[i] = e.spec;
          out[i].name = names[i].view();
          ++i;
        }
    };
    add(B::layout.entries);
    if constexpr (!std::is_void_v<S>) add(S::layout.entries);
    return out;
  }();
};

/// Fails unless a block's branches produce the same shape; the note shows the block (its
/// position BlockIndex in the chain at Where) and both shapes.
template <class Where, std::size_t BlockIndex, class BodyShape, class ShortcutShape>
constexpr bool check_branch_shapes() {
  if constexpr (!ShapeType<BodyShape> || !ShapeType<ShortcutShape>) {
    return false; // a branch already failed and said why
  } else {
    static_assert(
        std::is_same_v<BodyShape, ShortcutShape>,
        "Residual: the body and the shortcut of the block at BlockIndex (in the chain at Where) produce different "
        "shapes, BodyShape and ShortcutShape in the note below; they are added element by element (a "
        "projection shortcut, e.g. Branch<Conv2d<In, Out, 1, Stride, 0, false>, BatchNorm2d<Out>>, "
        "makes them match)");
    return std::is_same_v<BodyShape, ShortcutShape>;
  }
}

template <class... Ls>
std::string branch_signature() {
  std::string s = "[";
  bool first = true;
  ((s += (first ? "" : ","), s += Ls::signature(), first = false), ...);
  return s + "]";
}

template <class T>
struct is_branch : std::false_type {};
template <class... Ls>
struct is_branch<Branch<Ls...>> : std::true_type {};

/// The bound block: Residual<Branch<BodyLayers...>, Shortcut> at position I of the chain at
/// Where, on input shape In.
template <class Block, class Where, std::size_t I, class In, class Body, class Shortcut>
struct bound_residual;

template <class Block, class Where, std::size_t I, class In, class... BodyLayers, class Shortcut>
struct bound_residual<Block, Where, I, In, Branch<BodyLayers...>, Shortcut> {
  static constexpr bool identity = std::is_same_v<Shortcut, Identity>;
  using body_chain = layer_chain<in_block<I, branch::body, Where>, In, BodyLayers...>;
  template <class S>
  struct shortcut_of {
    using type = void;
  };
  template <class... Ls>
  struct shortcut_of<Branch<Ls...>> {
    using type = layer_chain<in_block<I, branch::shortcut, Where>, In, Ls...>;
  };
  using shortcut_chain = typename shortcut_of<Shortcut>::type;
  struct identity_chain {
    using output_shape = In;
  };
  using shortcut_output = typename std::conditional_t<identity, identity_chain, shortcut_chain>::output_shape;
  static constexpr bool ok = check_branch_shapes<Where, I, typename body_chain::output_shape, shortcut_output>();

  using layer = Block;
  using input_shape = In;
  using output_shape = std::conditional_t<ok, typename body_chain::output_shape, InvalidShape>;
  /// Values per sample the branches keep for backward (Network::activation_bytes).
  static constexpr std::size_t inner_activations = [] {
    std::size_t n = activation_count<typename body_chain::layers>::value;
    if constexpr (!identity) n += activation_count<typename shortcut_chain::layers>::value;
    return n;
  }();

  static constexpr auto parameters = branch_tensors<body_chain, shortcut_chain, TensorKind::parameter>::specs;
  static constexpr auto buffers = branch_tensors<body_chain, shortcut_chain, TensorKind::buffer>::specs;
  static constexpr auto counters = branch_tensors<body_chain, shortcut_chain, TensorKind::counter>::specs;

  // The block's slice of each store holds the body's layout, then the shortcut's: the packing of
  // the specs above (network/sequential.hpp's make_layout) lands every tensor where the branch's
  // own layout puts it. Checked here rather than trusted.
  static constexpr bool same_layout = [] {
    const auto params = packed_offsets(parameters);
    const auto bufs = packed_offsets(buffers);
    std::size_t p = 0, b = 0;
    if (!chain_tensors_in_place<body_chain>(params, bufs, p, b)) return false;
    if constexpr (!identity)
      return chain_tensors_in_place<shortcut_chain>(params, bufs, p, b, body_chain::parameter_store_size,
                                                    body_chain::buffer_store_size);
    return true;
  }();
  static_assert(same_layout, "Residual: internal error: the block's tensors are not where its branches look");

  template <class Backend, class T>
  struct state {
    struct none {
      void reserve(std::size_t) {}
    };
    Executor<body_chain, T, Backend> body;
    std::conditional_t<identity, none, Executor<std::conditional_t<identity, body_chain, shortcut_chain>, T, Backend>>
        shortcut;
    typename Backend::template buffer<T> masked; // d loss / d (body + shortcut) under a fused ReLU
    void reserve(std::size_t batch) {
      body.reserve(batch);
      shortcut.reserve(batch);
    }
  };

  /// A ReLU after the block is applied inside the sum (one pass over the output fewer).
  template <class Backend, class T>
  static constexpr bool fuses_relu = true;

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& st) {
    const ConstBatchView<In, T> x(a.x, a.batch);
    st.body.set_index_base((a.index + 1) * 64);
    const T* body_out = st.body.forward(a.ctx, a.step, body_store(a.params, a.buffers, a.counters, a.master), x).data();
    const T* shortcut_out = a.x;
    if constexpr (!identity) {
      st.shortcut.set_index_base((a.index + 1) * 64 + 32);
      shortcut_out =
          st.shortcut.forward(a.ctx, a.step, shortcut_store(a.params, a.buffers, a.counters, a.master), x).data();
    }
    ops::ElementwiseKernels<Backend>::add(a.ctx, body_out, shortcut_out, a.y, a.batch * output_shape::size,
                                          a.fused_relu);
  }

  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& st) {
    using K = ops::ElementwiseKernels<Backend>;
    const std::size_t n = a.batch * output_shape::size;
    const T* dy = a.dy;
    if (a.fused_relu) { // y is the ReLU's output: the sum's gradient is dy where y > 0
      if (st.masked.size() < n) st.masked.resize(n);
      K::relu_backward(a.ctx, a.y, a.dy, st.masked.data(), n);
      dy = st.masked.data();
    }
    const ConstBatchView<output_shape, T> g(dy, a.batch);
    const BackwardOptions o{.accumulate = a.accumulate, .input_grad = a.dx != nullptr};
    // Backward reads the running statistics only; StorePointers holds them mutable for forward.
    auto* buffers = const_cast<accumulator_t<T>*>(a.buffers);
    const T* body_dx = st.body.backward(a.ctx, body_store(a.params, buffers, nullptr, a.master), a.grads, g, o).data();
    const T* shortcut_dx = dy;
    if constexpr (!identity)
      shortcut_dx = st.shortcut
                        .backward(a.ctx, shortcut_store(a.params, buffers, nullptr, a.master),
                                  a.grads + body_chain::parameter_store_size, g, o)
                        .data();
    if (a.dx) K::add(a.ctx, body_dx, shortcut_dx, a.dx, a.batch * In::size, false);
  }

 private:
  template <class T>
  static StorePointers<T> body_store(const T* params, accumulator_t<T>* buffers, std::int64_t* counters,
                                     const accumulator_t<T>* master) {
    return {params, buffers, counters, master};
  }
  template <class T>
  static StorePointers<T> shortcut_store(const T* params, accumulator_t<T>* buffers, std::int64_t* counters,
                                         const accumulator_t<T>* master) {
    return {params + body_chain::parameter_store_size, buffers + body_chain::buffer_store_size,
            counters ? counters + body_chain::counter_store_size : nullptr,
            master ? master + body_chain::parameter_store_size : nullptr};
  }
};

} // namespace detail

/// `Residual<Branch<Layers...>, Shortcut = Identity>`: body(x) + shortcut(x), where Shortcut is
/// `Identity` or another `Branch<Layers...>` (a projection).
template <class... BodyLayers, class Shortcut>
struct Residual<Branch<BodyLayers...>, Shortcut> {
  static_assert(sizeof...(BodyLayers) > 0, "Residual: the body needs at least one layer");
  static_assert(std::is_same_v<Shortcut, Identity> || detail::is_branch<Shortcut>::value,
                "Residual: the shortcut must be Identity or a Branch<Layers...>");

  static constexpr std::string_view name = "Residual";
  static std::string signature() {
    std::string s = "Residual<body=" + detail::branch_signature<BodyLayers...>() + ",shortcut=";
    if constexpr (std::is_same_v<Shortcut, Identity>)
      s += "identity";
    else
      s += []<class... Ls>(std::type_identity<Branch<Ls...>>) {
        return detail::branch_signature<Ls...>();
      }(std::type_identity<Shortcut>{});
    return s + ">";
  }
  using expected_input = expect::AnyShape; // what it takes is what its branches take
  template <class In>
  static constexpr bool accepts = ShapeType<In>;

  /// Bound at position I of the chain at Where (so that errors inside name the block).
  template <class Where, std::size_t I, class In>
  using bind_at = detail::bound_residual<Residual, Where, I, In, Branch<BodyLayers...>, Shortcut>;
  template <class In>
  using bind = bind_at<detail::in_sequential, 0, In>;
};

} // namespace cohort
