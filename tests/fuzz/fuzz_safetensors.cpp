// libFuzzer target: SafetensorsFile::parse, then load_weights and load_checkpoint of whatever
// parsed, each into a fresh small network (and Adam). Every rejection must be a cohort::Error,
// and a rejected load must leave the parameters and the optimiser's state exactly as they were.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cohort/io/safetensors.hpp>

#include "fuzz_network.hpp"

using namespace cohort;

namespace {
/// Bytes, not floats: loaded values may be NaN, which == on floats would call changed.
template <class T>
void append_bytes(std::vector<char>& out, const T* data, std::size_t n) {
  const auto* b = reinterpret_cast<const char*>(data);
  out.insert(out.end(), b, b + n * sizeof(T));
}
std::vector<char> state_of(fuzz::FuzzParams& p, Adam<>* opt = nullptr) {
  std::vector<char> s;
  append_bytes(s, p.values.data(), p.values.size());
  if (opt)
    for (const auto& slot : opt->slots(p.values.size())) append_bytes(s, slot.values.data(), slot.values.size());
  return s;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<char> bytes(size);
  if (size) std::memcpy(bytes.data(), data, size);
  SafetensorsFile f;
  try {
    f = SafetensorsFile::parse("fuzz.safetensors", std::move(bytes));
  } catch (const Error&) {
    return 0;
  }
  // Everything a caller can read from a parsed file.
  std::size_t total = 0;
  for (const auto& e : f.entries()) {
    total += f.bytes(e).size();
    if (e.dtype == DType::f32) total += f.values<float>(e.name).size() * sizeof(float);
    if (e.dtype == DType::i64) total += f.values<std::int64_t>(e.name).size() * sizeof(std::int64_t);
  }
  if (total > 2 * size) __builtin_trap(); // tensors must lie inside the input

  {
    fuzz::FuzzParams p;
    p.initialize(1);
    const auto before = state_of(p);
    try {
      load_weights(f, p);
    } catch (const Error&) {
      if (state_of(p) != before) __builtin_trap(); // a failed load changed the network
    }
  }
  {
    fuzz::FuzzParams p;
    p.initialize(1);
    Adam<> opt({.lr = 1e-3});
    const auto before = state_of(p, &opt);
    try {
      load_checkpoint(f, p, opt);
      const auto& steps = f.metadata().at("cohort.optimizer.steps"); // there, or it would have failed
      if (opt.steps() != std::strtoull(steps.c_str(), nullptr, 10)) __builtin_trap();
    } catch (const Error&) {
      if (state_of(p, &opt) != before || opt.steps() != 0) __builtin_trap(); // a failed load changed something
    }
  }
  return 0;
}
