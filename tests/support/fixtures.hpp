#pragma once
// Loading the PyTorch reference fixtures (tests/reference/fixtures/*.safetensors).

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <cohort/io/safetensors.hpp>
#include <cohort/network/parameters.hpp>

#include "support/fixture_dir.hpp"

#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace cohort::test {

inline SafetensorsFile fixture(const std::string& name) {
  return SafetensorsFile::read(std::filesystem::path(COHORT_FIXTURE_DIR) / (name + ".safetensors"));
}

/// Copies a fixture tensor into a network tensor (by state_dict name) after checking the size.
template <class Net>
void load_tensor(Net& net, const SafetensorsFile& f, const std::string& key, const std::string& name) {
  const TensorRef ref = net.parameters().find(name);
  const auto& entry = f.at(key);
  if (entry.elements() != ref.size) throw std::runtime_error("fixture " + key + " has the wrong size for " + name);
  auto copy = [&](auto* dst) {
    using D = std::remove_pointer_t<decltype(dst)>;
    if (entry.dtype == DType::i64) {
      const auto v = f.values<std::int64_t>(key);
      for (std::size_t i = 0; i < v.size(); ++i) dst[i] = D(v[i]);
    } else {
      const auto v = f.values<float>(key);
      for (std::size_t i = 0; i < v.size(); ++i) dst[i] = D(v[i]);
    }
  };
  switch (ref.dtype) {
  case DType::f32:
    copy(static_cast<float*>(ref.data));
    break;
  case DType::f64:
    copy(static_cast<double*>(ref.data));
    break;
  case DType::i64:
    copy(static_cast<std::int64_t*>(ref.data));
    break;
  default:
    throw std::runtime_error("unexpected dtype for " + name);
  }
}

/// A network tensor (by state_dict name) as doubles, for comparisons.
template <class Net>
std::vector<double> tensor_values(Net& net, const std::string& name) {
  const TensorRef ref = net.parameters().find(name);
  std::vector<double> out(ref.size);
  for (std::size_t i = 0; i < ref.size; ++i) {
    switch (ref.dtype) {
    case DType::f32:
      out[i] = static_cast<const float*>(ref.data)[i];
      break;
    case DType::f64:
      out[i] = static_cast<const double*>(ref.data)[i];
      break;
    case DType::i64:
      out[i] = double(static_cast<const std::int64_t*>(ref.data)[i]);
      break;
    default:
      throw std::runtime_error("unexpected dtype for " + name);
    }
  }
  return out;
}

/// The gradient slice of parameter `name` (same offset as the parameter itself).
template <class Net>
std::span<const typename Net::value_type> gradient_of(Net& net, const std::string& name) {
  using T = typename Net::value_type;
  const TensorRef ref = net.parameters().find(name);
  const std::size_t offset = std::size_t(static_cast<const T*>(ref.data) - net.parameters().values.data());
  return {net.gradients().values.data() + offset, ref.size};
}

/// The torch.optim state an optimiser fixture holds after step `s` (its "state<s>.<name>"
/// tensors: exp_avg, momentum_buffer, ...), sorted, without the step count.
inline std::vector<std::string> optimizer_state_names(const SafetensorsFile& f, int s) {
  const std::string prefix = "state" + std::to_string(s) + ".";
  std::vector<std::string> names;
  for (const auto& e : f.entries())
    if (e.name.rfind(prefix, 0) == 0 && e.name != prefix + "step") names.push_back(e.name.substr(prefix.size()));
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace cohort::test
