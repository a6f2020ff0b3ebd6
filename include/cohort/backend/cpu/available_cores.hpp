#pragma once
/// \file
/// How many threads a process should train with, and why: the CPUs it may run on, as `nproc`
/// counts them, and no more than its share of the node.
///
///     const cohort::CoreBudget b = cohort::available_cores();
///     cohort::set_num_threads(b.threads);       // what Trainer does with TrainerOptions::threads = 0
///     std::printf("%zu threads (%s)\n", b.threads, b.why.c_str());
///
/// In order:
/// - `COHORT_NUM_THREADS=N` in the environment decides (an explicit request; not a positive
///   integer: ValueError naming the variable and its value).
/// - the CPU affinity mask (`taskset`, `mpirun --bind-to`, Slurm's binding): the CPUs this process
///   may run on, not the machine's;
/// - a cgroup CPU quota (Docker `--cpus`, Kubernetes limits; cgroup v2 `cpu.max`, v1
///   `cpu.cfs_quota_us`), rounded up, when it is lower;
/// - MPI ranks started on one node without binding (OpenMPI's `OMPI_COMM_WORLD_LOCAL_SIZE`,
///   MPICH's `MPI_LOCALNRANKS`) share those CPUs: each takes its part, at least one. Ranks bound
///   to their own cores already see only those in their mask, and are not divided again.
/// Results do not depend on the count: every kernel splits outputs, never sums
/// (backend/cpu/thread_pool.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

#include "cohort/core/error.hpp"

namespace cohort {

/// A thread count and the reason for it, in words for a start-up line.
struct CoreBudget {
  std::size_t threads = 1;
  std::string why;
};

namespace detail {

/// What the operating system says about this process; gathered by probe_cores(), passed to
/// core_budget() as plain values so the rules can be tested without the machine.
struct CoreFacts {
  std::size_t online = 1;                 // CPUs online in the machine
  std::size_t affinity = 1;               // CPUs in this process's affinity mask
  std::optional<double> quota{};          // cgroup quota in CPUs (1.5 = 150 ms per 100 ms)
  std::size_t local_ranks = 1;            // MPI ranks on this node (1 outside MPI)
  std::optional<std::string> requested{}; // COHORT_NUM_THREADS, if set
};

/// The quota in a cgroup v2 `cpu.max` ("150000 100000" -> 1.5 CPUs; "max 100000" -> none).
inline std::optional<double> parse_cpu_max(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || q <= 0) return std::nullopt;
  return q / period;
}

/// The rules of the file comment over `f`.
inline CoreBudget core_budget(const CoreFacts& f) {
  if (f.requested) {
    const std::string& s = *f.requested;
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || end == s.c_str() || *end != '\0' || n < 1 || n > 4096)
      throw ValueError("COHORT_NUM_THREADS: expected a whole number of threads from 1 to 4096, found \"" + s + "\"");
    return {std::size_t(n), "COHORT_NUM_THREADS=" + s};
  }
  std::size_t cores = std::max<std::size_t>(f.affinity, 1);
  std::string why = f.affinity < f.online ? std::to_string(f.affinity) + " of " + std::to_string(f.online) +
                                                " CPUs in this process's affinity mask"
                                          : "all " + std::to_string(f.online) + " CPUs of this machine";
  if (f.quota && std::ceil(*f.quota) < double(cores)) {
    cores = std::max<std::size_t>(std::size_t(std::ceil(*f.quota)), 1);
    std::ostringstream q;
    q << "a cgroup CPU quota of " << *f.quota << " CPUs";
    why = q.str();
  }
  // Ranks bound to cores have already been given theirs (the mask is narrower than the machine).
  if (f.local_ranks > 1 && f.affinity >= f.online) {
    const std::size_t share = std::max<std::size_t>(cores / f.local_ranks, 1);
    why += ", shared by " + std::to_string(f.local_ranks) + " MPI ranks on this node";
    cores = share;
  }
  return {cores, why};
}

/// The cgroup (v2, else v1) CPU quota of this process, if any.
inline std::optional<double> cgroup_quota() {
#if defined(__linux__)
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line, v2_path;
  while (std::getline(cgroup, line))
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
  // The quota of the process's own group and of every group above it: the tightest applies.
  std::optional<double> tightest;
  const auto consider = [&](std::optional<double> q) {
    if (q && (!tightest || *q < *tightest)) tightest = q;
  };
  for (std::string p = v2_path; !v2_path.empty();) {
    std::ifstream max("/sys/fs/cgroup" + p + "/cpu.max");
    std::string text;
    if (max && std::getline(max, text)) consider(parse_cpu_max(text));
    if (p.empty() || p == "/") break;
    const std::size_t slash = p.find_last_of('/');
    p = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  if (!tightest) { // cgroup v1
    std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), per("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    double quota = -1, period = 0;
    if (q >> quota && per >> period && quota > 0 && period > 0) tightest = quota / period;
  }
  return tightest;
#else
  return std::nullopt;
#endif
}

/// MPI ranks on this node, from the launcher's environment (1 outside MPI).
inline std::size_t local_mpi_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(name)) {
      const long n = std::strtol(v, nullptr, 10);
      if (n > 0) return std::size_t(n);
    }
  return 1;
}

inline CoreFacts probe_cores() {
  CoreFacts f;
  f.online = std::max<std::size_t>(std::thread::hardware_concurrency(), 1);
  f.affinity = f.online;
#if defined(__linux__)
  if (const long n = sysconf(_SC_NPROCESSORS_ONLN); n > 0) f.online = std::size_t(n);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    f.affinity = std::size_t(CPU_COUNT(&set));
  else
    f.affinity = f.online;
#endif
  f.quota = cgroup_quota();
  f.local_ranks = local_mpi_ranks();
  if (const char* v = std::getenv("COHORT_NUM_THREADS")) f.requested = v;
  return f;
}

} // namespace detail

/// The threads this process should use (see the file comment), with the reason.
inline CoreBudget available_cores() { return detail::core_budget(detail::probe_cores()); }

} // namespace cohort
