// WeightAverage (optim/weight_average.hpp) against torch's AveragedModel(model,
// multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True): every tensor of the average after
// each of 5 updates (the first copies), bit for bit, for a decay on each of lerp's two branches
// (fixtures weight_average_9 and weight_average_3, tests/reference/make_reference.py).

#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/optim/weight_average.hpp>

#include "support/fixtures.hpp"

using namespace cohort;

namespace {

using Net = Sequential<Input<1, 5, 5>, Conv2d<1, 3, 3>, BatchNorm2d<3>, ReLU, Flatten, Linear<27, 5>>;

/// Copies the fixture's tensors `prefix` + name into `p` (every tensor of the state_dict).
void fill(Parameters<Net, float, Cpu>& p, const SafetensorsFile& f, const std::string& prefix) {
  for (const TensorRef& t : p.state_dict()) {
    const auto bytes = f.bytes(f.at(prefix + t.name));
    REQUIRE(bytes.size() == t.bytes());
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
}

void check_against_torch(const char* fixture_name, double decay) {
  const SafetensorsFile f = test::fixture(fixture_name);
  WeightAverage<Net> ema({.decay = decay});
  Parameters<Net, float, Cpu> model, want;
  for (int k = 0; k < 5; ++k) {
    CAPTURE(k);
    fill(model, f, "snap" + std::to_string(k) + ".");
    ema.update(model);
    CHECK(ema.n_averaged() == std::uint64_t(k + 1));
    fill(want, f, "ema" + std::to_string(k) + ".");
    const auto got = ema.parameters().state_dict();
    const auto expected = want.state_dict();
    for (std::size_t t = 0; t < got.size(); ++t) {
      CAPTURE(got[t].name);
      CHECK(std::memcmp(got[t].data, expected[t].data, got[t].bytes()) == 0);
    }
  }
}

} // namespace

TEST_CASE("WeightAverage: torch's AveragedModel EMA bit for bit, decay 0.9 (lerp's small-weight branch)") {
  check_against_torch("weight_average_9", 0.9);
}

TEST_CASE("WeightAverage: torch's AveragedModel EMA bit for bit, decay 0.3 (lerp's large-weight branch)") {
  check_against_torch("weight_average_3", 0.3);
}

TEST_CASE("WeightAverage: a decay outside [0, 1] or every = 0 is a ValueError") {
  CHECK_THROWS_WITH_AS(WeightAverage<Net>({.decay = 1.5}), doctest::Contains("decay must be in [0, 1]"), ValueError);
  CHECK_THROWS_WITH_AS(WeightAverage<Net>({.decay = -0.1}), doctest::Contains("got -0.1"), ValueError);
  CHECK_THROWS_AS(WeightAverage<Net>({.every = 0}), ValueError);
  CHECK_NOTHROW(WeightAverage<Net>({.decay = 1.0}));
}
