#pragma once
/// \file
/// Freezing: the part of a network a fine-tune keeps fixed, as torch's `requires_grad_(False)`
/// together with `module.eval()` on that part.
/// Example (compiled: tests/docs/headers.cpp, "network/freezing"):
///
///     net.freeze(cohort::Freeze::below(21));            // layers 0..20 fixed: only the head trains
///     net.freeze(cohort::Freeze::names({"0", "1."}));    // by state_dict name (prefixes)
///     cohort::TrainerOptions o{.freeze = cohort::Freeze::below(21)};   // the same for any policy
///
/// Freezing works on whole layers of the Sequential (a Residual block is one layer). A frozen
/// layer
///   - gets no parameter gradient, and the optimiser neither moves it nor changes its state
///     (weight decay and momentum included): torch's optimisers skip a tensor without a gradient;
///   - runs in evaluation mode unless `eval_mode` is false: its BatchNorm normalises with the
///     running statistics and keeps them, its dropout is off (torch: `backbone.eval()`); with
///     `eval_mode = false` it trains its statistics as torch does after `requires_grad_(False)`
///     alone;
///   - below the lowest trainable layer, is not visited by backward at all: no input gradient, no
///     weight gradient. A head-only fine-tune costs one forward pass plus the head's backward.

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

/// What to freeze: a range of layers, state_dict name prefixes, or both (their union).
struct Freeze {
  /// Layers [first, last) of the Sequential (an empty range: none).
  std::size_t first = 0, last = 0;
  /// state_dict name prefixes: a layer is frozen when every tensor of it matches one ("4"
  /// matches "4.weight" and "4.body.0.weight", never "40.weight"; a layer without tensors, such
  /// as a ReLU or a Dropout, matches by its own name "4"). A prefix that selects only part of a
  /// layer, or nothing, is an error naming it.
  std::vector<std::string> prefixes{};
  /// Frozen layers run in evaluation mode (BatchNorm uses and keeps its running statistics,
  /// dropout is off). false: they run in the network's mode, as with requires_grad_(False) alone.
  bool eval_mode = true;

  /// Layers [0, layer): the usual fine-tune, a frozen backbone under a trainable head.
  static Freeze below(std::size_t layer, bool eval_mode = true) {
    return {.first = 0, .last = layer, .eval_mode = eval_mode};
  }
  /// Layers [first, last).
  static Freeze layers(std::size_t first, std::size_t last, bool eval_mode = true) {
    return {.first = first, .last = last, .eval_mode = eval_mode};
  }
  /// The layers whose tensors all start with one of `prefixes`.
  static Freeze names(std::vector<std::string> prefixes, bool eval_mode = true) {
    return {.prefixes = std::move(prefixes), .eval_mode = eval_mode};
  }
  /// From text, as a command line gives it: comma-separated items, each "below:N" (layers
  /// 0..N-1) or a state_dict prefix ("0,1,3.body"). Empty: nothing frozen. Prefixes are checked
  /// against the network later (frozen_layers).
  static Freeze parse(std::string_view text) {
    Freeze f;
    while (!text.empty()) {
      const std::size_t comma = text.find(',');
      const std::string_view item = text.substr(0, comma);
      text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
      if (item.empty()) throw ValueError("Freeze: an empty item in the list (expected below:N or a name prefix)");
      if (item.starts_with("below:")) {
        const std::string_view n = item.substr(6);
        std::size_t v = 0;
        const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
        if (ec != std::errc{} || end != n.data() + n.size() || v == 0)
          throw ValueError(detail::concat("Freeze: '", item, "': expected below:N with N a layer count >= 1"));
        f.first = 0;
        f.last = std::max(f.last, v);
      } else {
        f.prefixes.emplace_back(item);
      }
    }
    return f;
  }
  bool empty() const noexcept { return first >= last && prefixes.empty(); }
};

/// A run [offset, offset + size) of the flat parameter store.
struct ParameterRange {
  std::size_t offset = 0, size = 0;
  friend bool operator==(const ParameterRange&, const ParameterRange&) = default;
};

/// A Freeze resolved against a network: which of its layers are frozen.
struct FrozenLayers {
  /// One entry per layer of the Sequential (empty: nothing frozen).
  std::vector<bool> layer{};
  bool eval_mode = true;

  bool any() const noexcept { return std::find(layer.begin(), layer.end(), true) != layer.end(); }
  bool operator[](std::size_t i) const noexcept { return i < layer.size() && layer[i]; }
  /// "0-20" style list of the frozen layers, for messages and rank agreement ("none").
  std::string text() const {
    std::string s;
    for (std::size_t i = 0; i < layer.size();) {
      if (!layer[i]) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j + 1 < layer.size() && layer[j + 1]) ++j;
      s += (s.empty() ? "" : ",") + std::to_string(i) + (j > i ? "-" + std::to_string(j) : "");
      i = j + 1;
    }
    return s.empty() ? "none" : s + (eval_mode ? " (eval mode)" : " (train mode)");
  }
  friend bool operator==(const FrozenLayers&, const FrozenLayers&) = default;
};

namespace detail {
/// Whether state_dict name `name` starts with `prefix` at a name boundary.
inline bool name_has_prefix(std::string_view name, std::string_view prefix) noexcept {
  if (prefix.empty() || !name.starts_with(prefix)) return false;
  return prefix.back() == '.' || name.size() == prefix.size() || name[prefix.size()] == '.';
}

template <class List>
struct layer_name_list;
template <class... Bs>
struct layer_name_list<type_list<Bs...>> {
  static constexpr std::array<std::string_view, sizeof...(Bs)> value{Bs::layer::name...};
};
} // namespace detail

/// Which layers of Net `f` freezes; a ValueError names a range past the network, a prefix that
/// matches nothing or only part of a layer, and a freeze that leaves nothing to train.
template <ChainDescription Net>
FrozenLayers frozen_layers(const Freeze& f) {
  constexpr std::size_t L = Net::layer_count;
  FrozenLayers out{.layer = {}, .eval_mode = f.eval_mode};
  if (f.empty()) return out;
  constexpr auto& names = detail::layer_name_list<typename Net::layers>::value;
  out.layer.assign(L, false);
  if (f.first < f.last) {
    if (f.last > L)
      throw ValueError(detail::concat("Freeze: layers [", f.first, ", ", f.last, ") but the network has ", L,
                                      " layers (0 to ", L - 1, ")"));
    for (std::size_t i = f.first; i < f.last; ++i) out.layer[i] = true;
  }
  for (const std::string& p : f.prefixes) {
    bool matched = false;
    for (std::size_t i = 0; i < L; ++i) {
      std::size_t tensors = 0, hits = 0;
      for (const auto& e : Net::layout.entries)
        if (e.layer == i) {
          ++tensors;
          hits += detail::name_has_prefix(e.name(), p);
        }
      const std::string own = std::to_string(i);
      if (tensors == 0 ? (p == own || p == own + ".") : hits == tensors) {
        out.layer[i] = matched = true;
      } else if (hits > 0) {
        throw ValueError(detail::concat(
            "Freeze: prefix '", p, "' selects ", hits, " of the ", tensors, " tensors of layer ", i, " (", names[i],
            "): freezing works on whole layers of the Sequential; use '", i, "' for the whole layer"));
      }
    }
    if (!matched)
      throw ValueError(detail::concat(
          "Freeze: prefix '", p, "' matches no layer of the network (its ", L, " layers are named 0 to ", L - 1,
          ", their tensors '<layer>.<name>' such as '",
          Net::layout.entries.empty() ? std::string("0.weight") : Net::layout.entries.front().name(), "')"));
  }
  bool trainable = false;
  for (const auto& e : Net::layout.entries)
    trainable = trainable || (e.kind == TensorKind::parameter && !out.layer[e.layer]);
  if (!trainable)
    throw ValueError(
        detail::concat("Freeze: layers ", out.text(),
                       " are frozen, which leaves no parameter to train (torch: no tensor requires grad)"));
  return out;
}

/// The parameter store runs of the frozen layers, in order, neighbours merged: what optimisers
/// skip (StepSettings::frozen).
template <ChainDescription Net>
std::vector<ParameterRange> frozen_parameter_ranges(const FrozenLayers& f) {
  std::vector<ParameterRange> out;
  constexpr auto& base = Net::layout.param_base;
  for (std::size_t i = 0; i < Net::layer_count; ++i) {
    if (!f[i] || base[i + 1] == base[i]) continue;
    if (!out.empty() && out.back().offset + out.back().size == base[i])
      out.back().size += base[i + 1] - base[i];
    else
      out.push_back({base[i], base[i + 1] - base[i]});
  }
  return out;
}

} // namespace cohort
