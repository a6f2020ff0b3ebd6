#pragma once
/// \file
/// What every layer provides, and what the network hands a layer when it runs.
///
/// A *layer* is an empty descriptor type with its hyperparameters as template arguments
/// (`Conv2d<1, 16, 3>`). Given the shape it receives, `Layer::bind<In>` is the *bound layer*: it
/// knows its output shape, its parameter tensors and how to run forward and backward on a
/// backend. Sequential binds each layer to the shape the previous one produces.
///
/// A layer type `L` has:
///   - `L::name`                       "Conv2d", for messages and signatures
///   - `L::signature()`                "Conv2d<1,16,3,1,0>", to compare networks across ranks
///   - `L::expected_input`             what it accepts, as shown in compile errors
///   - `L::accepts<In>`                whether it takes shape `In`
///   - `L::bind<In>`                   the bound layer (see BoundLayer below)

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/core/dtype.hpp"
#include "cohort/core/shape.hpp"

namespace cohort {

/// Training or evaluation behaviour (dropout, batch statistics).
enum class Mode : std::uint8_t { train, eval };

/// How a tensor is initialised (PyTorch's defaults for the layers cohort has).
enum class Init : std::uint8_t {
  zeros,
  ones,
  /// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's kaiming_uniform(a=sqrt(5)) for weights and
  /// its bias rule, which reduce to the same bound.
  uniform_fan_in,
};

/// One named tensor a layer owns ("weight", "running_mean"), up to rank 4.
struct TensorSpec {
  std::string_view name;
  std::size_t rank = 0;
  std::array<std::size_t, 4> dims{};
  Init init = Init::zeros;
  std::size_t fan_in = 0;

  constexpr std::size_t size() const noexcept {
    std::size_t s = 1;
    for (std::size_t i = 0; i < rank; ++i) s *= dims[i];
    return s;
  }
};

/// Tensors inside a flat store start at multiples of this many elements (64 bytes of float),
/// so every tensor is aligned for vector loads.
inline constexpr std::size_t tensor_alignment = 16;

constexpr std::size_t round_up(std::size_t n, std::size_t m) noexcept { return (n + m - 1) / m * m; }

/// Offsets of `specs` packed one after another, each aligned; the last entry is the padded total.
template <std::size_t N>
constexpr std::array<std::size_t, N + 1> packed_offsets(const std::array<TensorSpec, N>& specs) noexcept {
  std::array<std::size_t, N + 1> off{};
  std::size_t o = 0;
  if constexpr (N > 0) // (nvcc warns that i < 0 is pointless when N is 0)
    for (std::size_t i = 0; i < N; ++i) {
      off[i] = o;
      o = round_up(o + specs[i].size(), tensor_alignment);
    }
  off[N] = o;
  return off;
}

/// Facts about the current pass that are the same for every layer.
struct StepInfo {
  Mode mode = Mode::train;
  /// Seed of the dropout streams.
  std::uint64_t seed = 0;
  /// Number of training forward passes before this one: selects fresh dropout masks.
  std::uint64_t step = 0;
  /// Where this batch's samples sit in the global batch (replicas and ranks see shards): sample
  /// i is global sample `sample_offset + i * sample_stride`. Random numbers are indexed by
  /// global sample, so masks do not depend on how a batch is split.
  std::uint64_t sample_offset = 0;
  std::uint64_t sample_stride = 1;
  /// False on every replica but one, so running statistics are updated exactly once.
  bool update_buffers = true;
};

/// What a bound layer's forward receives. Pointers are into the network's flat stores.
template <class Backend, class T>
struct ForwardArgs {
  typename Backend::context& ctx;
  const StepInfo& step;
  std::size_t index; // position in the Sequential, counted from 0
  std::size_t batch;
  const T* params;           // this layer's parameters (null if it has none)
  accumulator_t<T>* buffers; // running statistics
  std::int64_t* counters;    // num_batches_tracked
  const T* x;                // (batch, In...)
  T* y;                      // (batch, Out...)
  /// The executor fused the following ReLU into this layer: write max(y, 0).
  bool fused_relu = false;
  /// Mixed precision: this layer's float master parameters (layers that compute in float from
  /// float weights under Apex O2, as BatchNorm, read them); null when T is the master type.
  const accumulator_t<T>* master = nullptr;
};

/// What a bound layer's backward receives.
template <class Backend, class T>
struct BackwardArgs {
  typename Backend::context& ctx;
  const StepInfo& step;
  std::size_t index;
  std::size_t batch;
  const T* params;
  accumulator_t<T>* grads; // this layer's gradient slots, same layout as params (float for 16-bit T)
  const accumulator_t<T>* buffers;
  const T* x;      // the forward input
  const T* y;      // the forward output
  const T* dy;     // d loss / d y
  T* dx;           // d loss / d x; null when nobody needs it (first layer)
  bool accumulate; // add to grads instead of overwriting them
  /// The following ReLU was fused: y is its output and dy its gradient, so this layer's own
  /// output gradient is dy where y > 0, else 0.
  bool fused_relu = false;
  const accumulator_t<T>* master = nullptr; // as ForwardArgs::master
};

namespace detail {
/// A layer's parameters as the normalisation kernels read them, in the accumulator type: under
/// mixed precision the float master copy (Apex O2 keeps normalisation in fp32), else the
/// parameters themselves (ForwardArgs or BackwardArgs).
template <class Args>
const auto* float_parameters(const Args& a) {
  using T = std::remove_cvref_t<decltype(*a.params)>;
  if constexpr (std::is_same_v<T, accumulator_t<T>>)
    return a.master ? a.master : a.params;
  else
    return a.master; // always given for 16-bit storage (the engines pass it)
}
} // namespace detail

/// Base for bound layers without tensors or per-batch state.
struct NoTensors {
  static constexpr std::array<TensorSpec, 0> parameters{};
  static constexpr std::array<TensorSpec, 0> buffers{};
  static constexpr std::array<TensorSpec, 0> counters{};
};

/// Per-batch state of layers that keep none.
struct NoState {
  void reserve(std::size_t) noexcept {}
};

/// A layer descriptor, before it is bound to an input shape.
template <class L>
concept Layer = requires {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::signature() } -> std::convertible_to<std::string>;
  typename L::expected_input;
};

/// A layer bound to its input shape.
template <class B>
concept BoundLayer = requires {
  typename B::input_shape;
  typename B::output_shape;
  B::parameters;
  B::buffers;
  B::counters;
}
&&ShapeType<typename B::output_shape>;

namespace detail {
/// "<1,16,3>" from template arguments, for signatures.
template <class... Args>
std::string template_args(const Args&... args) {
  std::string s = "<";
  bool first = true;
  ((
       s += (first ? "" : ","),
       s +=
       [&] {
         if constexpr (std::is_floating_point_v<Args>) {
           std::string v = std::to_string(args);
           return v;
         } else {
           return std::to_string(args);
         }
       }(),
       first = false),
   ...);
  return s + ">";
}
} // namespace detail

} // namespace cohort
