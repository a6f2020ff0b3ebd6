#pragma once
// The check that an optimiser's state after step `s` is torch.optim's, from an optimiser fixture
// (tests/reference/ "state<s>.<name>" tensors): the same set of slots under torch's names (none
// for SGD without momentum) and the same values. Shared by the CPU and device optimiser tests.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <cohort/io/safetensors.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"

namespace cohort::test {

/// `slots`: the optimiser's slots(n); `host_values(slot)`: a slot's values in host memory.
template <class Slots, class HostValues>
void check_optimizer_state(const SafetensorsFile& f, int s, const Slots& slots, HostValues&& host_values, double rtol,
                           const std::string& at) {
  std::vector<std::string> names;
  for (const auto& slot : slots) names.push_back(slot.name);
  std::sort(names.begin(), names.end());
  CHECK_MESSAGE(names == optimizer_state_names(f, s), at << ": optimiser state names differ from torch's");
  for (const auto& slot : slots) {
    const std::string key = "state" + std::to_string(s) + "." + slot.name;
    if (!f.find(key)) continue; // reported by the name check above
    COHORT_CHECK_CLOSE(host_values(slot), f.values<float>(key), rtol, at + " " + slot.name);
  }
}

} // namespace cohort::test
