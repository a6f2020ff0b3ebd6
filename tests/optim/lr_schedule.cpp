// Learning-rate schedules against torch.optim.lr_scheduler: every rate of every fixture case
// (tests/reference/make_lr_schedules.py) bit for bit, and the spec parser's errors.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixture_dir.hpp"
#include <cohort/optim/adam.hpp>
#include <cohort/optim/lr_schedule.hpp>
#include <cohort/optim/optimizer_variant.hpp>
#include <cohort/optim/sgd.hpp>

using namespace cohort;

namespace {
struct Case {
  std::string spec;
  double base;
  std::vector<double> rates, momenta; // momenta: OneCycleLR cycling the momentum
};
std::vector<double> numbers(const std::string& text) {
  std::vector<double> out;
  std::istringstream values(text);
  for (std::string v; values >> v;) out.push_back(std::strtod(v.c_str(), nullptr));
  return out;
}
std::vector<Case> read_cases() {
  std::ifstream in(std::string(COHORT_FIXTURE_DIR) + "/lr_schedules.txt");
  REQUIRE_MESSAGE(in.good(), "missing tests/reference/fixtures/lr_schedules.txt");
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto a = line.find('|'), b = line.find('|', a + 1), m = line.find('|', b + 1);
    Case c{line.substr(0, a), std::strtod(line.substr(a + 1, b - a - 1).c_str(), nullptr), {}, {}};
    c.rates = numbers(line.substr(b + 1, m == std::string::npos ? std::string::npos : m - b - 1));
    if (m != std::string::npos) c.momenta = numbers(line.substr(m + 1));
    cases.push_back(std::move(c));
  }
  return cases;
}
} // namespace

TEST_CASE("LrSchedule: every rate equals torch.optim.lr_scheduler's, bit for bit") {
  const auto cases = read_cases();
  REQUIRE(cases.size() == 14);
  std::size_t cycled = 0;
  for (const Case& c : cases) {
    const LrSchedule s = LrSchedule::parse(c.spec);
    for (std::size_t t = 0; t < c.rates.size(); ++t) {
      INFO(c.spec << " base " << c.base << " after " << t << " steps");
      CHECK(s.lr(c.base, t) == c.rates[t]); // exact: the same double operations in the same order
      // OneCycleLR's momentum (torch's cycle_momentum, on by default), the same way; none else.
      if (c.momenta.empty())
        CHECK(!s.momentum(t));
      else
        CHECK(s.momentum(t) == c.momenta[t]);
    }
    cycled += !c.momenta.empty();
  }
  CHECK(cycled == 4);
}

TEST_CASE(
    "LrSchedule: no schedule keeps the base rate, and a schedule is pure in the step count (what resume relies on)") {
  CHECK(LrSchedule().lr(0.25, 1000) == 0.25);
  CHECK(LrSchedule::parse("none").empty());
  const LrSchedule s = LrSchedule::parse("cosine,warmup=5,start_factor=0.1,t_max=95");
  const double later = s.lr(0.1, 42);
  CHECK(s.lr(0.1, 7) != later);
  CHECK(s.lr(0.1, 42) == later);
}

TEST_CASE("LrSchedule: bad specs are ValueErrors naming the spec, the key and the value") {
  const auto fails = [](const char* spec, const char* text) {
    INFO(spec);
    CHECK_THROWS_WITH_AS(LrSchedule::parse(spec), doctest::Contains(text), ValueError);
  };
  fails("exponential,gamma=0.9", "unknown kind \"exponential\"");
  fails("step,gama=0.5", "unknown key \"gama\" for step");
  fails("step,step_size=two", "step_size=two is not a whole number");
  fails("step,step_size=-1", "step_size=-1 is not a whole number");
  fails("step,gamma=nan", "gamma=nan is not a finite number");
  fails("step,step_size", "\"step_size\" is not key=value");
  fails("step,step_size=0", "StepLR step_size is 0, expected >= 1");
  fails("cosine,t_max=0", "cosine t_max is 0");
  fails("constant,factor=1.5", "ConstantLR factor is 1.5");
  fails("onecycle,max_lr=0.1,total_steps=10,anneal=exp", "anneal=exp (expected cos or linear)");
  CHECK_THROWS_WITH_AS(LrSchedule::parse("onecycle,max_lr=0.1,total_steps=10").lr(0.0, 11),
                       doctest::Contains("step 11 is past total_steps 10"), ValueError);
}

TEST_CASE("set_lr: the next step runs at the new rate and keeps the optimiser's state") {
  // SGD with momentum, two steps on p = 1 with gradient 1: buf = 1, then 0.9 * 1 + 1 = 1.9.
  std::vector<float> p{1.f}, g{1.f};
  Sgd opt({.lr = 0.1, .momentum = 0.9});
  opt.step(p, g);
  opt.set_lr(0.05);
  CHECK(opt.lr() == 0.05);
  opt.step(p, g);
  CHECK(p[0] == doctest::Approx(1.0 - 0.1 - 0.05 * 1.9).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(opt.set_lr(-1.0), doctest::Contains("lr"), ValueError);
  OptimizerVariant<Sgd<>, Adam<>> any(Adam({.lr = 1e-3}));
  any.set_lr(2e-3);
  CHECK(any.lr() == 2e-3);
}
