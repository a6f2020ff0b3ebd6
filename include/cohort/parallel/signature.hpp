#pragma once
/// \file
/// What processes that train together must agree on, one line per item, and the message that
/// says where two of them differ.
/// Example (compiled: tests/docs/headers.cpp, "parallel/signature"):
///
///     auto lines = cohort::network_signature<Net>();          // "layer 3: Conv2d<16,32,3,1,0> ..."
///     std::string why = cohort::signature_difference(mine, theirs, 0, 2);
///
/// ProcessGroupDDP gathers every rank's lines at start (a 64-bit hash first, the full text only
/// when hashes differ) and stops every rank with the first difference.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

namespace detail {
template <class List>
struct layer_lines;
template <class... Bs>
struct layer_lines<type_list<Bs...>> {
  static void add(std::vector<std::string>& out) {
    std::size_t i = 0;
    ((out.push_back(concat("layer ", i, ": ", Bs::layer::signature(), " ", Bs::input_shape::str(), " -> ",
                           Bs::output_shape::str())),
      ++i),
     ...);
  }
};
} // namespace detail

/// One line for the input, one per layer (hyperparameters and shapes) and one per tensor (its
/// state_dict name, kind and shape).
template <NetworkDescription Net>
std::vector<std::string> network_signature() {
  std::vector<std::string> lines{"input: " + Net::input_shape::str()};
  detail::layer_lines<typename Net::layers>::add(lines);
  for (const auto& e : Net::layout.entries) {
    std::string dims;
    for (std::size_t d = 0; d < e.spec.rank; ++d) {
      // Appended piece by piece: "x" + std::string trips GCC 12's false -Wrestrict (PR 105651)
      // in users' -O3 builds.
      if (d) dims += 'x';
      dims += std::to_string(e.spec.dims[d]);
    }
    lines.push_back(detail::concat("tensor ", e.name(), ": ",
                                   e.kind == TensorKind::parameter ? "parameter"
                                   : e.kind == TensorKind::buffer  ? "buffer"
                                                                   : "counter",
                                   " ", dims.empty() ? "scalar" : dims));
  }
  return lines;
}

/// The lines joined by newlines (what is hashed and sent).
inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

/// FNV-1a, 64 bits: equal texts give equal hashes on every platform.
inline std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Where rank `b`'s text differs from rank `a`'s (both joined by join_lines): the first line
/// that differs, quoted from both, or the one that only one of them has. Empty when equal.
inline std::string signature_difference(std::string_view text_a, std::string_view text_b, std::size_t a,
                                        std::size_t b) {
  auto split = [](std::string_view t) {
    std::vector<std::string_view> v;
    while (!t.empty()) {
      const std::size_t nl = t.find('\n');
      v.push_back(t.substr(0, nl));
      t = nl == std::string_view::npos ? std::string_view{} : t.substr(nl + 1);
    }
    return v;
  };
  const auto la = split(text_a), lb = split(text_b);
  for (std::size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    if (i >= la.size()) return detail::concat("rank ", b, " has \"", lb[i], "\" where rank ", a, " has nothing more");
    if (i >= lb.size()) return detail::concat("rank ", a, " has \"", la[i], "\" where rank ", b, " has nothing more");
    if (la[i] != lb[i]) return detail::concat("rank ", a, " has \"", la[i], "\", rank ", b, " has \"", lb[i], "\"");
  }
  return {};
}

} // namespace cohort
