#pragma once
/// \file
/// The flat stores that hold a network's tensors, and their names.
/// Example (compiled: tests/docs/headers.cpp, "network/parameters"):
///
///     cohort::Parameters<Net, float, cohort::Cpu> p;   // parameters, running statistics, counters
///     p.initialize(/*seed=*/0);                        // PyTorch's default initialisation, seeded
///     for (auto& t : p.state_dict()) std::cout << t.name << '\n';   // "0.weight", "0.bias", ...
///
/// All parameters sit in one contiguous, aligned array in state_dict order (likewise gradients,
/// running statistics and counters). Optimisers, all-reduce buckets and checkpoints work on the
/// flat arrays; layers get pointers to their slices.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/detail/xtensor_interop.hpp"

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/random.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// A named tensor of a network, as in a state_dict: where it is and what it holds.
struct TensorRef {
  std::string name;
  TensorKind kind = TensorKind::parameter;
  DType dtype = DType::f32;
  std::vector<std::size_t> shape;
  void* data = nullptr;
  std::size_t size = 0; // elements

  std::size_t bytes() const noexcept { return size * dtype_size(dtype); }
};

namespace detail {
/// A string usable as a template argument: `view<0, "weight">()`.
template <std::size_t N>
struct fixed_string {
  char text[N]{};
  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

/// Index in Net::layout.entries of tensor `name` of layer `layer`, or entries.size() if none.
template <class Net>
constexpr std::size_t find_entry(std::size_t layer, std::string_view name) {
  for (std::size_t i = 0; i < Net::layout.entries.size(); ++i)
    if (Net::layout.entries[i].layer == layer && Net::layout.entries[i].spec.name == name) return i;
  return Net::layout.entries.size();
}
} // namespace detail

namespace detail {
/// Copies one store into another of the same element type on any two backends: host to host by
/// assignment, across the host/device boundary through the device buffer's copy functions.
template <class Dst, class Src>
void copy_store(Dst& dst, const Src& src) {
  if constexpr (
      requires { dst.assign_from_host(src.data(), src.size()); } &&
      !requires { src.copy_to_host(dst.data(), src.size()); })
    dst.assign_from_host(src.data(), src.size()); // host -> device
  else if constexpr (
      requires { src.copy_to_host(dst.data(), src.size()); } &&
      !requires { dst.assign_from_host(src.data(), src.size()); }) {
    dst.resize(src.size()); // device -> host
    src.copy_to_host(dst.data(), src.size());
  } else {
    dst = src; // same kind of memory
  }
}
} // namespace detail

/// Parameters, running statistics and counters of one network (its "state_dict").
///
/// On a device backend (`Backend::host_memory == false`) values and running statistics are
/// device memory: initialize() fills them through a host copy, copy_from() moves whole stores
/// between backends, and the host views (state_dict, view, parameter, find) do not compile:
/// copy to a `Parameters<Net, T, Cpu>` first.
template <ChainDescription Net, class T, class Backend>
class Parameters {
  static constexpr bool on_host = host_memory_backend<Backend>;

 public:
  using net_type = Net;
  using value_type = T;
  using stat_type = accumulator_t<T>;

  Parameters() {
    values.resize(Net::parameter_store_size);
    buffers.resize(Net::buffer_store_size);
    counters.resize(Net::counter_store_size);
  }

  /// Trainable parameters, flat, state_dict order, each tensor 64-byte aligned.
  typename Backend::template buffer<T> values;
  /// Running statistics (BatchNorm running_mean / running_var).
  typename Backend::template buffer<stat_type> buffers;
  /// Integer buffers (BatchNorm num_batches_tracked): host bookkeeping on every backend (the
  /// layers count on the host).
  HostBuffer<std::int64_t> counters;

  /// PyTorch's default initialisation from `seed`: weights and biases U(-1/sqrt(fan_in),
  /// 1/sqrt(fan_in)), BatchNorm weight 1 and bias 0, running mean 0 and variance 1. Tensor `j`
  /// (in state_dict order) draws from its own stream, element `i` from index `i`:
  /// w = float((2u - 1) * bound) with u uniform in [0, 1) and the arithmetic in double.
  void initialize(std::uint64_t seed) {
    if constexpr (!on_host) {
      Parameters<Net, T, Cpu> host;
      host.initialize(seed);
      copy_from(host);
      return;
    }
    std::size_t ordinal = 0;
    for (const LayoutEntry& e : Net::layout.entries) {
      const std::size_t n = e.spec.size();
      switch (e.kind) {
      case TensorKind::parameter:
        fill(values.data() + e.offset, n, e.spec, seed, ordinal);
        break;
      case TensorKind::buffer:
        fill(buffers.data() + e.offset, n, e.spec, seed, ordinal);
        break;
      case TensorKind::counter:
        for (std::size_t i = 0; i < n; ++i) counters[e.offset + i] = 0;
        break;
      }
      ++ordinal;
    }
  }

  /// Takes every tensor of `src`, which may live on another backend (host <-> device).
  template <class OtherBackend>
  void copy_from(const Parameters<Net, T, OtherBackend>& src) {
    detail::copy_store(values, src.values);
    detail::copy_store(buffers, src.buffers);
    counters = src.counters;
  }

  /// Every tensor under its state_dict name, in state_dict order.
  std::vector<TensorRef> state_dict() requires on_host {
    std::vector<TensorRef> out;
    out.reserve(Net::layout.entries.size());
    for (const LayoutEntry& e : Net::layout.entries) {
      TensorRef r;
      r.name = e.name();
      r.kind = e.kind;
      r.shape.assign(e.spec.dims.begin(), e.spec.dims.begin() + std::ptrdiff_t(e.spec.rank));
      r.size = e.spec.size();
      switch (e.kind) {
      case TensorKind::parameter:
        r.dtype = dtype_of<T>;
        r.data = values.data() + e.offset;
        break;
      case TensorKind::buffer:
        r.dtype = dtype_of<stat_type>;
        r.data = buffers.data() + e.offset;
        break;
      case TensorKind::counter:
        r.dtype = DType::i64;
        r.data = counters.data() + e.offset;
        break;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  /// Tensor `Name` of layer `Layer` as an xtensor adaptor with its compile-time shape (needs
  /// <cohort/tensor/xtensor.hpp>):
  ///     auto w = params.view<0, "weight">();   // xt::xfixed_adaptor, shape (16, 1, 3, 3)
  template <std::size_t Layer, detail::fixed_string Name, class Tag = void>
  auto view() requires on_host {
    constexpr std::size_t i = detail::find_entry<Net>(Layer, Name.view());
    static_assert(i < Net::layout.entries.size(), "Parameters::view: this layer has no tensor of that name");
    constexpr LayoutEntry e = Net::layout.entries[i];
    return [&]<std::size_t... D>(std::index_sequence<D...>) {
      using interop = detail::XtensorInterop<Tag>;
      if constexpr (e.kind == TensorKind::parameter)
        return interop::template adapt_fixed<e.spec.dims[D]...>(values.data() + e.offset);
      else if constexpr (e.kind == TensorKind::buffer)
        return interop::template adapt_fixed<e.spec.dims[D]...>(buffers.data() + e.offset);
      else
        return interop::template adapt_fixed<e.spec.dims[D]...>(counters.data() + e.offset);
    }
    (std::make_index_sequence<e.spec.rank>{});
  }

  /// Trainable tensor `name` ("0.weight") as an xtensor adaptor with a run-time shape (needs
  /// <cohort/tensor/xtensor.hpp>).
  template <class Tag = void>
  auto parameter(std::string_view name) requires on_host {
    return typed<T, Tag>(name, TensorKind::parameter);
  }
  /// Running statistic `name` ("1.running_mean").
  template <class Tag = void>
  auto buffer(std::string_view name) requires on_host {
    return typed<stat_type, Tag>(name, TensorKind::buffer);
  }

  /// The tensor called `name`; throws ValueError listing what exists when there is none.
  TensorRef find(std::string_view name) requires on_host {
    for (TensorRef& r : state_dict())
      if (r.name == name) return r;
    std::string known;
    for (const LayoutEntry& e : Net::layout.entries) {
      if (!known.empty()) known += ", ";
      known += e.name();
    }
    throw ValueError(detail::concat("no tensor named \"", name, "\" in this network; it has: ", known));
  }

 private:
  template <class U, class Tag>
  auto typed(std::string_view name, TensorKind kind) {
    TensorRef r = find(name);
    if (r.kind != kind)
      throw ValueError(detail::concat("tensor \"", name, "\" is not a ",
                                      kind == TensorKind::parameter ? "parameter" : "running statistic"));
    return detail::XtensorInterop<Tag>::adapt(static_cast<U*>(r.data), r.size, r.shape);
  }

  template <class U>
  static void fill(U* dst, std::size_t n, const TensorSpec& spec, std::uint64_t seed, std::size_t ordinal) {
    switch (spec.init) {
    case Init::zeros:
      for (std::size_t i = 0; i < n; ++i) dst[i] = U(0);
      break;
    case Init::ones:
      for (std::size_t i = 0; i < n; ++i) dst[i] = U(1);
      break;
    case Init::uniform_fan_in: {
      const double bound = 1.0 / std::sqrt(double(spec.fan_in));
      const RandomStream rng{seed, streams::init(ordinal)};
      for (std::size_t i = 0; i < n; ++i) dst[i] = U((2.0 * double(rng.uniform(i)) - 1.0) * bound);
      break;
    }
    }
  }
};

/// Gradients of a network's parameters: same layout as Parameters::values, in the accumulator
/// type (float for float and the 16-bit types: mixed precision keeps fp32 gradients).
template <ChainDescription Net, class T, class Backend>
class Gradients {
 public:
  using value_type = accumulator_t<T>;
  Gradients() { values.resize(Net::parameter_store_size); }
  typename Backend::template buffer<value_type> values;
};

} // namespace cohort
