#pragma once
/// \file
/// Channel concatenation: a layer whose output is torch.cat([first(x), second(x)], dim=1), each
/// branch a list of layers bound to the block's input (or Identity, the input itself). A U-Net's
/// skip is `Concat<Identity, Branch<down, ..., up>>`: the encoder's features beside what the
/// level below made of them.
/// Example (compiled: tests/docs/headers.cpp, "layers/concat"):
///
///     using Level = Concat<Identity, Branch<MaxPool2d<2>, Conv2d<8, 16, 3, 1, 1>, ReLU, Upsample<2>>>;
///     using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 3, 1, 1>, ReLU, Level,  // -> (8 + 16, 28, 28)
///                            Conv2d<24, 8, 3, 1, 1>>;
///
/// Tensors are named as the PyTorch module `Concat(first, second)` of tests/reference/cohort_modules.py
/// names them: "2.first.0.weight", "2.second.1.weight" (none for an Identity branch), so
/// `load_state_dict(strict=True)` works both ways. Blocks nest: a branch may hold Concat,
/// Residual and Gated blocks. Branches whose images differ in height or width are a compile error
/// naming the block's position and both shapes.
///
/// Each branch runs with an Executor of its own over its slice of the network's stores, as a
/// Residual's do; dropout in a branch draws from streams of its own: branch layer j of the block at
/// position i reports position (i + 1) * 64 + j (first) or + 32 + j (second). Backward splits dy
/// by channels, runs each branch back, and adds the two input gradients.

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/backend/ops.hpp"
#include "cohort/layers/layer.hpp"
#include "cohort/layers/residual.hpp" // Branch, Identity, the branch tensors' renaming
#include "cohort/network/executor.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/batch.hpp"

namespace cohort {

template <class First, class Second>
struct Concat;

namespace branch {
struct first {};  // a Concat's first branch, in compile errors
struct second {}; // its second
} // namespace branch

namespace detail {

struct concat_branch_names {
  static constexpr std::string_view first = "first", second = "second";
};
struct concat_second_names { // the first branch is Identity: the second's tensors come first
  static constexpr std::string_view first = "second", second = "";
};

/// Fails unless both branches produce images of the same height and width; the note shows the
/// block (its position BlockIndex in the chain at Where) and both shapes.
template <class Where, std::size_t BlockIndex, class FirstShape, class SecondShape>
constexpr bool check_concat_shapes() {
  if constexpr (!ShapeType<FirstShape> || !ShapeType<SecondShape>) {
    return false; // a branch already failed and said why
  } else if constexpr (!ImageShape<FirstShape> || !ImageShape<SecondShape>) {
    static_assert(ImageShape<FirstShape> && ImageShape<SecondShape>,
                  "Concat: the branches of the block at BlockIndex (in the chain at Where) must produce (C, H, W) "
                  "images, joined along C; they produce FirstShape and SecondShape (in the note below)");
    return false;
  } else {
    constexpr bool ok =
        FirstShape::extents[1] == SecondShape::extents[1] && FirstShape::extents[2] == SecondShape::extents[2];
    static_assert(ok, "Concat: the branches of the block at BlockIndex (in the chain at Where) produce images of "
                      "different height or width, FirstShape and SecondShape in the note below; they are joined "
                      "along the channels, so H and W must agree (crop, pad or resample one branch to match)");
    return ok;
  }
}

template <class B>
struct concat_branch_layers; // Branch<Ls...> -> its layers
template <class... Ls>
struct concat_branch_layers<Branch<Ls...>> {
  template <class Where, class In>
  using chain = layer_chain<Where, In, Ls...>;
  static std::string signature() { return branch_signature<Ls...>(); }
};

/// The bound block: Concat<First, Second> at position I of the chain at Where, on input In.
template <class Block, class Where, std::size_t I, class In, class First, class Second>
struct bound_concat {
  static constexpr bool first_identity = std::is_same_v<First, Identity>;
  static constexpr bool second_identity = std::is_same_v<Second, Identity>;

  template <class Br, class Tag, bool Id>
  struct chain_of {
    using type = void;
  };
  template <class Br, class Tag>
  struct chain_of<Br, Tag, false> {
    using type = typename concat_branch_layers<Br>::template chain<in_block<I, Tag, Where>, In>;
  };
  using first_chain = typename chain_of<First, branch::first, first_identity>::type;
  using second_chain = typename chain_of<Second, branch::second, second_identity>::type;

  template <class C, bool Void = std::is_void_v<C>>
  struct output_of {
    using type = typename C::output_shape;
  };
  template <class C>
  struct output_of<C, true> { // Identity
    using type = In;
  };
  using first_shape = typename output_of<first_chain>::type;
  using second_shape = typename output_of<second_chain>::type;
  static constexpr bool ok = check_concat_shapes<Where, I, first_shape, second_shape>();

  static constexpr std::size_t first_channels = ok ? first_shape::extents[0] : 1;
  static constexpr std::size_t second_channels = ok ? second_shape::extents[0] : 1;
  static constexpr std::size_t plane = ok ? first_shape::extents[1] * first_shape::extents[2] : 1;

  using layer = Block;
  using input_shape = In;
  using output_shape = std::conditional_t<
      ok,
      Shape<first_channels + second_channels, (ok ? first_shape::extents[1] : 1), (ok ? first_shape::extents[2] : 1)>,
      InvalidShape>;
  /// Values per sample the branches keep for backward (Network::activation_bytes).
  static constexpr std::size_t inner_activations = [] {
    std::size_t n = 0;
    if constexpr (!first_identity) n += activation_count<typename first_chain::layers>::value;
    if constexpr (!second_identity) n += activation_count<typename second_chain::layers>::value;
    return n;
  }();

  /// The tensors of one kind: the first branch's, then the second's.
  template <TensorKind Kind>
  static constexpr auto specs_of() {
    if constexpr (!first_identity)
      return branch_tensors<first_chain, second_chain, Kind, concat_branch_names>::specs;
    else if constexpr (!second_identity)
      return branch_tensors<second_chain, void, Kind, concat_second_names>::specs;
    else
      return std::array<TensorSpec, 0>{};
  }
  static constexpr auto parameters = specs_of<TensorKind::parameter>();
  static constexpr auto buffers = specs_of<TensorKind::buffer>();
  static constexpr auto counters = specs_of<TensorKind::counter>();

  template <class C, bool Void = std::is_void_v<C>>
  struct store_sizes {
    static constexpr std::size_t params = C::parameter_store_size, buffers = C::buffer_store_size,
                                 counters = C::counter_store_size;
  };
  template <class C>
  struct store_sizes<C, true> { // Identity
    static constexpr std::size_t params = 0, buffers = 0, counters = 0;
  };
  static constexpr std::size_t first_params = store_sizes<first_chain>::params;
  static constexpr std::size_t first_buffers = store_sizes<first_chain>::buffers;
  static constexpr std::size_t first_counters = store_sizes<first_chain>::counters;

  // The block's slice of each store holds the first branch's layout, then the second's
  // (checked, as Residual checks its own).
  static constexpr bool same_layout = [] {
    const auto params = packed_offsets(parameters);
    const auto bufs = packed_offsets(buffers);
    std::size_t p = 0, b = 0;
    if constexpr (!first_identity)
      if (!chain_tensors_in_place<first_chain>(params, bufs, p, b)) return false;
    if constexpr (!second_identity)
      return chain_tensors_in_place<second_chain>(params, bufs, p, b, first_params, first_buffers);
    return true;
  }();
  static_assert(same_layout, "Concat: internal error: the block's tensors are not where its branches look");

  template <class Backend, class T>
  struct state {
    struct none {
      void reserve(std::size_t) {}
    };
    template <class C, bool Void = std::is_void_v<C>>
    struct executor_of {
      using type = Executor<C, T, Backend>;
    };
    template <class C>
    struct executor_of<C, true> { // Identity
      using type = none;
    };
    template <class C>
    using executor = typename executor_of<C>::type;
    executor<first_chain> first;
    executor<second_chain> second;
    typename Backend::template buffer<T> dy_first, dy_second; // dy split by channels
    void reserve(std::size_t batch) {
      first.reserve(batch);
      second.reserve(batch);
    }
  };

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& st) {
    const ConstBatchView<In, T> x(a.x, a.batch);
    const T* first_out = a.x;
    const T* second_out = a.x;
    if constexpr (!first_identity) {
      st.first.set_index_base((a.index + 1) * 64);
      first_out = st.first.forward(a.ctx, a.step, first_store(a.params, a.buffers, a.counters, a.master), x).data();
    }
    if constexpr (!second_identity) {
      st.second.set_index_base((a.index + 1) * 64 + 32);
      second_out = st.second.forward(a.ctx, a.step, second_store(a.params, a.buffers, a.counters, a.master), x).data();
    }
    using K = ops::ElementwiseKernels<Backend>;
    constexpr std::size_t c = first_channels + second_channels;
    K::copy_channels(a.ctx, first_out, a.y, ops::ChannelCopy{a.batch, plane, first_channels, first_channels, 0, c, 0});
    K::copy_channels(a.ctx, second_out, a.y,
                     ops::ChannelCopy{a.batch, plane, second_channels, second_channels, 0, c, first_channels});
  }

  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& st) {
    using K = ops::ElementwiseKernels<Backend>;
    constexpr std::size_t c = first_channels + second_channels;
    const std::size_t n_first = a.batch * first_channels * plane, n_second = a.batch * second_channels * plane;
    // An Identity branch's part of dy matters only for the input gradient.
    if (!first_identity || a.dx) {
      if (st.dy_first.size() < n_first) st.dy_first.resize(n_first);
      K::copy_channels(a.ctx, a.dy, st.dy_first.data(),
                       ops::ChannelCopy{a.batch, plane, first_channels, c, 0, first_channels, 0});
    }
    if (!second_identity || a.dx) {
      if (st.dy_second.size() < n_second) st.dy_second.resize(n_second);
      K::copy_channels(a.ctx, a.dy, st.dy_second.data(),
                       ops::ChannelCopy{a.batch, plane, second_channels, c, first_channels, second_channels, 0});
    }
    const BackwardOptions o{.accumulate = a.accumulate, .input_grad = a.dx != nullptr};
    // Backward reads the running statistics only; StorePointers holds them mutable for forward.
    auto* buffers = const_cast<accumulator_t<T>*>(a.buffers);
    const T* first_dx = st.dy_first.data();
    const T* second_dx = st.dy_second.data();
    if constexpr (!first_identity)
      first_dx = st.first
                     .backward(a.ctx, first_store(a.params, buffers, nullptr, a.master), a.grads,
                               ConstBatchView<first_shape, T>(st.dy_first.data(), a.batch), o)
                     .data();
    if constexpr (!second_identity)
      second_dx = st.second
                      .backward(a.ctx, second_store(a.params, buffers, nullptr, a.master), a.grads + first_params,
                                ConstBatchView<second_shape, T>(st.dy_second.data(), a.batch), o)
                      .data();
    if (a.dx) K::add(a.ctx, first_dx, second_dx, a.dx, a.batch * In::size, false);
  }

 private:
  template <class T>
  static StorePointers<T> first_store(const T* params, accumulator_t<T>* buffers, std::int64_t* counters,
                                      const accumulator_t<T>* master) {
    return {params, buffers, counters, master};
  }
  template <class T>
  static StorePointers<T> second_store(const T* params, accumulator_t<T>* buffers, std::int64_t* counters,
                                       const accumulator_t<T>* master) {
    return {params + first_params, buffers + first_buffers, counters ? counters + first_counters : nullptr,
            master ? master + first_params : nullptr};
  }
};

} // namespace detail

/// `Concat<First, Second>`: torch.cat([first(x), second(x)], dim=1), where each of First and
/// Second is `Identity` or a `Branch<Layers...>`; the output has the channels of both.
template <class First, class Second>
struct Concat {
  static_assert(std::is_same_v<First, Identity> || detail::is_branch<First>::value,
                "Concat: the first branch must be Identity or a Branch<Layers...>");
  static_assert(std::is_same_v<Second, Identity> || detail::is_branch<Second>::value,
                "Concat: the second branch must be Identity or a Branch<Layers...>");

  static constexpr std::string_view name = "Concat";
  static std::string signature() {
    const auto branch = [](auto tag) {
      using B = typename decltype(tag)::type;
      if constexpr (std::is_same_v<B, Identity>)
        return std::string("identity");
      else
        return detail::concat_branch_layers<B>::signature();
    };
    return "Concat<first=" + branch(std::type_identity<First>{}) + ",second=" + branch(std::type_identity<Second>{}) +
           ">";
  }
  using expected_input = expect::AnyShape; // what it takes is what its branches take
  template <class In>
  static constexpr bool accepts = ShapeType<In>;

  /// Bound at position I of the chain at Where (so that errors inside name the block).
  template <class Where, std::size_t I, class In>
  using bind_at = detail::bound_concat<Concat, Where, I, In, First, Second>;
  template <class In>
  using bind = bind_at<detail::in_sequential, 0, In>;
};

} // namespace cohort
