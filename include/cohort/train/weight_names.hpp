#pragma once
/// \file
/// Loading weights that someone else named: renaming rules from a file's tensor names to the
/// network's state_dict names, torch's non-strict load (missing and unexpected keys reported, not
/// refused), and what a load did. Used by load_weights and Trainer::init_from (train/checkpoint.hpp).
/// Example (compiled: tests/docs/headers.cpp, "train/weight_names"):
///
///     cohort::LoadOptions o{.rename = {cohort::RenameRule::prefix("backbone.", ""),  // backbone.0.weight: 0.weight
///                                      cohort::RenameRule::exact("fc.weight", "9.weight")},
///                           .strict = false};
///     cohort::LoadReport r = cohort::load_weights("model.safetensors", net.parameters(), o);
///     // r.missing: the network's tensors the file lacks (left as they were); r.unexpected: the
///     // file's tensors (by their own names) that no tensor of the network takes
///
/// Rules apply to the file's names in order; the first that matches renames, and names no rule
/// matches are kept. Two file tensors that land on one name are an error. Half-precision tensors
/// (F16, BF16) load into a float network exactly (every such value is a float); anything else of
/// another dtype, and every shape mismatch, is an error naming the tensor, the file's own name for
/// it and both shapes, strict or not (as torch's load_state_dict raises on a size mismatch).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cohort {

/// A file tensor name -> network tensor name rule: an exact name, or a prefix replaced.
struct RenameRule {
  std::string from, to;
  bool is_prefix = false;

  static RenameRule exact(std::string from, std::string to) { return {std::move(from), std::move(to), false}; }
  static RenameRule prefix(std::string from, std::string to) { return {std::move(from), std::move(to), true}; }

  /// Whether the rule renames `name`, and to what.
  bool matches(std::string_view name) const noexcept {
    return is_prefix ? name.substr(0, from.size()) == from : name == from;
  }
  std::string apply(std::string_view name) const { return is_prefix ? to + std::string(name.substr(from.size())) : to; }
};

struct LoadOptions {
  std::vector<RenameRule> rename{};
  /// torch's strict: every network tensor must be in the file and every file tensor must be the
  /// network's ("optimizer.*" state excepted). false: both lists are reported in LoadReport.
  bool strict = true;
};

/// What a load did (torch's load_state_dict result, plus the conversions).
struct LoadReport {
  std::vector<std::string> missing;    ///< network tensors (state_dict names) the file lacks: unchanged
  std::vector<std::string> unexpected; ///< file tensors (the file's names) no network tensor takes
  std::vector<std::string> converted;  ///< network tensors loaded from F16/BF16 (exact)
  std::size_t loaded = 0;              ///< network tensors loaded
};

/// The rules the other way round (every rule's `from` and `to` swapped): a load map turned into
/// the map that saves under the other program's names (save_weights' `rename`).
inline std::vector<RenameRule> inverted(std::vector<RenameRule> rules) {
  for (auto& r : rules) std::swap(r.from, r.to);
  return rules;
}

namespace detail {

/// The network name a file tensor name maps to under `rules` (the first rule that matches).
inline std::string renamed(const std::vector<RenameRule>& rules, std::string_view file_name) {
  for (const auto& r : rules)
    if (r.matches(file_name)) return r.apply(file_name);
  return std::string(file_name);
}

} // namespace detail
} // namespace cohort
