#pragma once
// The torch cases of tests/reference/fixtures/cross_entropy_options.txt (written by
// tests/reference/make_cross_entropy.py): cross_entropy with label_smoothing and weight.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "support/fixture_dir.hpp"
#include <cohort/loss/cross_entropy_options.hpp>

namespace cohort::test {

struct CrossEntropyCase {
  static constexpr std::size_t classes = 10;
  std::string name;
  CrossEntropyOptions options;
  std::vector<std::int32_t> labels;
  std::vector<double> logits; // float32 values (rows x classes)
  double loss64 = 0, loss32 = 0;
  std::vector<double> grad64, grad32; // torch in float64 (the reference) and in float32
  std::size_t rows() const { return labels.size(); }
  std::vector<float> logits_float() const { return {logits.begin(), logits.end()}; }
};

inline std::vector<CrossEntropyCase> cross_entropy_cases() {
  std::ifstream in(std::string(COHORT_FIXTURE_DIR) + "/cross_entropy_options.txt");
  REQUIRE_MESSAGE(in.good(), "missing tests/reference/fixtures/cross_entropy_options.txt");
  const auto numbers = [](const std::string& text) {
    std::istringstream s(text);
    std::vector<double> v;
    for (std::string t; s >> t;) v.push_back(std::stod(t)); // repr() of doubles: read back exactly
    return v;
  };
  std::vector<CrossEntropyCase> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::istringstream s(line);
    for (std::string part; std::getline(s, part, '|');) f.push_back(part);
    REQUIRE(f.size() == 9);
    CrossEntropyCase c;
    c.name = f[0];
    c.options.label_smoothing = std::stod(f[1]);
    if (f[2] != "none")
      for (double w : numbers(f[2])) c.options.class_weights.push_back(float(w));
    for (double y : numbers(f[3])) c.labels.push_back(std::int32_t(y));
    c.logits = numbers(f[4]);
    c.loss64 = std::stod(f[5]);
    c.grad64 = numbers(f[6]);
    c.loss32 = std::stod(f[7]);
    c.grad32 = numbers(f[8]);
    REQUIRE(c.logits.size() == c.rows() * CrossEntropyCase::classes);
    REQUIRE(c.grad64.size() == c.logits.size());
    out.push_back(std::move(c));
  }
  REQUIRE(out.size() >= 4);
  return out;
}

} // namespace cohort::test
