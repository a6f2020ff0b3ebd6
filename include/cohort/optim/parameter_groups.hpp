#pragma once
/// \file
/// Parameter groups: parts of the flat parameter array that an optimiser treats differently
/// (torch.optim's param_groups), and the rule that picks them per tensor.
/// Example (compiled: tests/docs/headers.cpp, "optim/parameter_groups"):
///
///     // The usual CNN recipe: no weight decay on BatchNorm parameters and biases.
///     opt.set_parameter_groups(cohort::parameter_groups<Net>(cohort::no_decay_on_norms_and_biases()));
///     // or through the Trainer: TrainerOptions{.parameter_groups = cohort::no_decay_on_norms_and_biases()}
///     // The fast-training recipes' BatchNorm biases at 64x the learning rate:
///     opt.set_parameter_groups(cohort::parameter_groups<Net>(cohort::for_batch_norm_biases({.lr_scale = 64})));
///
/// A rule sees every parameter tensor (its state_dict name, layer, tensor name and rank) and
/// returns its settings: a learning-rate multiplier and, optionally, its own weight decay.
/// Neighbouring tensors with the same settings are merged, so an optimiser step runs one pass
/// per run of equal settings (a ResNet-20 alternates about 40 of them), not per tensor. The
/// alignment padding after a tensor belongs to that tensor's group (its gradient is zero).
///
/// Unlike torch, where each group has its own learning rate that a scheduler scales, a group
/// here has a multiplier on the optimiser's (scheduled) rate: lr_group = lr_scale * lr.

#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

/// How an optimiser treats one group of parameters.
struct GroupSettings {
  /// Multiplies the optimiser's learning rate (and a schedule's) for this group.
  double lr_scale = 1.0;
  /// This group's weight decay (empty: the optimiser's).
  std::optional<double> weight_decay{};

  friend bool operator==(const GroupSettings&, const GroupSettings&) = default;
};

/// A run of the flat parameter array [offset, offset + size) and its settings.
struct ParameterGroup {
  std::size_t offset = 0, size = 0;
  GroupSettings settings{};

  friend bool operator==(const ParameterGroup&, const ParameterGroup&) = default;
};

/// What a group rule sees of one parameter tensor.
struct ParameterInfo {
  std::string name;        // state_dict key: "4.weight", "3.body.1.bias"
  std::string_view tensor; // the layer's name for it: "weight", "body.1.bias"
  std::size_t layer = 0;   // position in the Sequential
  std::size_t rank = 0;    // 1 for biases and normalisation weights, 2 for Linear, 4 for Conv2d
  /// A BatchNorm's weight or bias: the (sub-)layer that holds it also holds running statistics
  /// ("3.body.1.bias" beside "3.body.1.running_mean"). Convolution and Linear biases are not.
  bool batch_norm = false;
};

/// Picks a tensor's settings.
using GroupRule = std::function<GroupSettings(const ParameterInfo&)>;

/// Whether a tensor is a bias or a normalisation parameter: rank 1 (BatchNorm weight and bias,
/// every layer's bias; weight matrices and kernels have rank >= 2), as timm and most recipes
/// decide.
inline bool is_norm_or_bias(const ParameterInfo& t) noexcept {
  return t.rank <= 1 || t.tensor == "bias" || t.tensor.ends_with(".bias");
}

namespace detail {
/// A group's learning-rate multiplier must be finite and >= 0 (the rule builders refuse others).
inline void check_lr_scale(double lr_scale) {
  if (!(lr_scale >= 0) || !std::isfinite(lr_scale))
    throw ValueError(concat("parameter groups: invalid lr_scale ", lr_scale, " (expected a finite value >= 0)"));
}
} // namespace detail

/// `norm_and_bias` for BatchNorm parameters and biases, the optimiser's settings elsewhere.
inline GroupRule for_norms_and_biases(GroupSettings norm_and_bias) {
  detail::check_lr_scale(norm_and_bias.lr_scale);
  return [norm_and_bias](const ParameterInfo& t) { return is_norm_or_bias(t) ? norm_and_bias : GroupSettings{}; };
}

/// `bias` for BatchNorm biases only, the optimiser's settings elsewhere: the fast-training
/// recipes' BatchNorm-bias learning-rate scale (airbench trains them at 64x the rate), which
/// for_norms_and_biases cannot express since it also takes BatchNorm weights and every other bias.
inline GroupRule for_batch_norm_biases(GroupSettings bias) {
  detail::check_lr_scale(bias.lr_scale);
  return [bias](const ParameterInfo& t) {
    return t.batch_norm && (t.tensor == "bias" || t.tensor.ends_with(".bias")) ? bias : GroupSettings{};
  };
}

/// The usual CNN rule in one line: weight decay 0 on BatchNorm parameters and biases.
inline GroupRule no_decay_on_norms_and_biases() { return for_norms_and_biases({.weight_decay = 0.0}); }

/// Both rules at once: a tensor's learning-rate multipliers multiply, and `second`'s weight decay
/// replaces `first`'s where it sets one. An empty rule counts as the optimiser's settings. The
/// recipes' pair: `combine(no_decay_on_norms_and_biases(), for_batch_norm_biases({.lr_scale = 64}))`.
inline GroupRule combine(GroupRule first, GroupRule second) {
  return [first = std::move(first), second = std::move(second)](const ParameterInfo& t) {
    GroupSettings a = first ? first(t) : GroupSettings{};
    const GroupSettings b = second ? second(t) : GroupSettings{};
    a.lr_scale *= b.lr_scale;
    if (b.weight_decay) a.weight_decay = b.weight_decay;
    return a;
  };
}

namespace detail {
/// Whether parameter `p`'s (sub-)layer also holds a "running_mean" buffer, i.e. is a BatchNorm.
template <class Net>
bool holds_running_statistics(const LayoutEntry& p) {
  const std::string_view name = p.spec.name;
  const std::size_t dot = name.rfind('.');
  const std::string statistics =
      std::string(dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot + 1)) + "running_mean";
  for (const auto& e : Net::layout.entries)
    if (e.layer == p.layer && e.kind != TensorKind::parameter && e.spec.name == statistics) return true;
  return false;
}
} // namespace detail

/// The groups `rule` makes of network Net's parameters (Net::layout order), neighbours with equal
/// settings merged; they cover the whole parameter store.
template <class Net>
std::vector<ParameterGroup> parameter_groups(const GroupRule& rule) {
  if (!rule) throw ValueError("parameter_groups: the rule is empty");
  std::vector<ParameterGroup> out;
  for (const auto& e : Net::layout.entries) {
    if (e.kind != TensorKind::parameter) continue;
    const GroupSettings s =
        rule(ParameterInfo{e.name(), e.spec.name, e.layer, e.spec.rank, detail::holds_running_statistics<Net>(e)});
    if (!(s.lr_scale >= 0) || !std::isfinite(s.lr_scale))
      throw ValueError(detail::concat("parameter groups: tensor ", e.name(), " got lr_scale ", s.lr_scale,
                                      " (expected a finite value >= 0)"));
    if (s.weight_decay && (!(*s.weight_decay >= 0) || !std::isfinite(*s.weight_decay)))
      throw ValueError(detail::concat("parameter groups: tensor ", e.name(), " got weight_decay ", *s.weight_decay,
                                      " (expected a finite value >= 0)"));
    if (!out.empty() && out.back().settings == s) continue; // extends the previous run
    if (!out.empty()) out.back().size = e.offset - out.back().offset;
    out.push_back({e.offset, 0, s});
  }
  if (out.empty()) return out;
  out.front().offset = 0; // padding before the first tensor (none today) joins the first group
  out.back().size = Net::parameter_store_size - out.back().offset;
  return out;
}

namespace detail {
/// Throws unless `groups` are consecutive, non-empty runs starting at 0 with valid settings.
inline void check_parameter_groups(const char* opt, const std::vector<ParameterGroup>& groups) {
  std::size_t next = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const ParameterGroup& g = groups[i];
    if (g.offset != next || g.size == 0)
      throw ValueError(concat(opt, ": parameter group ", i, " covers [", g.offset, ", ", g.offset + g.size,
                              "), expected a non-empty run starting at ", next,
                              " (groups are consecutive runs from 0: parameter_groups<Net>)"));
    if (!(g.settings.lr_scale >= 0) || !std::isfinite(g.settings.lr_scale))
      throw ValueError(concat(opt, ": parameter group ", i, " has lr_scale ", g.settings.lr_scale,
                              " (expected a finite value >= 0)"));
    if (g.settings.weight_decay && (!(*g.settings.weight_decay >= 0) || !std::isfinite(*g.settings.weight_decay)))
      throw ValueError(concat(opt, ": parameter group ", i, " has weight_decay ", *g.settings.weight_decay,
                              " (expected a finite value >= 0)"));
    next = g.offset + g.size;
  }
}
} // namespace detail

} // namespace cohort
