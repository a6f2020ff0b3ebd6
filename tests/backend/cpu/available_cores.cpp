// available_cores(): the rules (affinity, cgroup quota, MPI ranks on the node, COHORT_NUM_THREADS)
// over plain facts, and the Trainer's default of every available core.

#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <cohort/backend/cpu/available_cores.hpp>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

using namespace cohort;
using detail::core_budget;
using detail::CoreFacts;

TEST_CASE("available_cores: a cgroup v2 cpu.max is a quota in CPUs, or none") {
  CHECK(detail::parse_cpu_max("150000 100000").value() == doctest::Approx(1.5));
  CHECK(detail::parse_cpu_max("200000 100000\n").value() == doctest::Approx(2.0));
  CHECK_FALSE(detail::parse_cpu_max("max 100000").has_value());
  CHECK_FALSE(detail::parse_cpu_max("").has_value());
  CHECK_FALSE(detail::parse_cpu_max("abc 100000").has_value());
  CHECK_FALSE(detail::parse_cpu_max("100000 0").has_value());
}

TEST_CASE("available_cores: the affinity mask, then a lower quota, then the node's MPI ranks decide") {
  SUBCASE("the whole machine") {
    const CoreBudget b = core_budget({.online = 8, .affinity = 8});
    CHECK(b.threads == 8);
    CHECK(b.why == "all 8 CPUs of this machine");
  }
  SUBCASE("taskset -c 0-2") {
    const CoreBudget b = core_budget({.online = 8, .affinity = 3});
    CHECK(b.threads == 3);
    CHECK(b.why == "3 of 8 CPUs in this process's affinity mask");
  }
  SUBCASE("docker --cpus=1.5 rounds up; a quota above the mask changes nothing") {
    CHECK(core_budget({.online = 8, .affinity = 8, .quota = 1.5}).threads == 2);
    CHECK(core_budget({.online = 8, .affinity = 8, .quota = 1.5}).why == "a cgroup CPU quota of 1.5 CPUs");
    CHECK(core_budget({.online = 8, .affinity = 2, .quota = 4.0}).threads == 2);
    CHECK(core_budget({.online = 8, .affinity = 8, .quota = 0.25}).threads == 1);
  }
  SUBCASE("unbound MPI ranks share the node; bound ones already have their cores") {
    const CoreBudget shared = core_budget({.online = 8, .affinity = 8, .local_ranks = 4});
    CHECK(shared.threads == 2);
    CHECK(shared.why == "all 8 CPUs of this machine, shared by 4 MPI ranks on this node");
    CHECK(core_budget({.online = 2, .affinity = 2, .local_ranks = 3}).threads == 1); // never 0
    CHECK(core_budget({.online = 8, .affinity = 4, .local_ranks = 2}).threads == 4); // each bound to 4 cores
  }
  SUBCASE("COHORT_NUM_THREADS decides, and a bad value names itself") {
    CHECK(core_budget({.online = 8, .affinity = 2, .requested = std::string("5")}).threads == 5);
    CHECK(core_budget({.online = 8, .affinity = 2, .requested = std::string("5")}).why == "COHORT_NUM_THREADS=5");
    for (const char* bad : {"", "0", "-2", "two", "3x", "100000"})
      CHECK_THROWS_WITH_AS(
          core_budget({.requested = std::string(bad)}),
          ("COHORT_NUM_THREADS: expected a whole number of threads from 1 to 4096, found \"" + std::string(bad) + "\"")
              .c_str(),
          ValueError);
  }
}

TEST_CASE("available_cores: this process sees at least one CPU and no more than the machine has") {
  const CoreFacts f = detail::probe_cores();
  CHECK(f.affinity >= 1);
  CHECK(f.affinity <= f.online);
  MESSAGE("this machine: ", f.online, " online, ", f.affinity, " in the mask, quota ",
          f.quota ? std::to_string(*f.quota) : std::string("none"));
}

namespace {
/// Restores COHORT_NUM_THREADS (tests/main.cpp sets it to 1) and the pool size on scope exit.
struct ThreadsEnvScope {
  std::optional<std::string> saved;
  std::size_t pool = num_threads();
  ThreadsEnvScope() {
    if (const char* v = std::getenv("COHORT_NUM_THREADS")) saved = v;
  }
  ~ThreadsEnvScope() {
    if (saved)
      setenv("COHORT_NUM_THREADS", saved->c_str(), 1);
    else
      unsetenv("COHORT_NUM_THREADS");
    set_num_threads(pool);
  }
};
} // namespace

TEST_CASE("Trainer: the CPU pool defaults to every available core, and TrainerOptions::threads overrides it") {
  ThreadsEnvScope scope;
  unsetenv("COHORT_NUM_THREADS");
  set_num_threads(1);
  const CoreBudget expected = available_cores();
  {
    Trainer<models::ModelC, Sgd<>> t(Sgd({.lr = 0.1}), {.log = nullptr});
    CHECK(t.threads().threads == expected.threads);
    CHECK(t.threads().why == expected.why);
    CHECK(num_threads() == expected.threads);
  }
  {
    Trainer<models::ModelC, Sgd<>> t(Sgd({.lr = 0.1}), {.threads = 3, .log = nullptr});
    CHECK(t.threads().threads == 3);
    CHECK(num_threads() == 3);
  }
  setenv("COHORT_NUM_THREADS", "2", 1);
  {
    Trainer<models::ModelC, Sgd<>> t(Sgd({.lr = 0.1}), {.log = nullptr});
    CHECK(num_threads() == 2);
    CHECK(t.threads().why == "COHORT_NUM_THREADS=2");
  }
}
