#pragma once
// Small helpers shared by the benchmark programs.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace cohort::bench {

/// Exits with status 2 and says why when this program was built by a tree that only checks that
/// the benchmarks compile (COHORT_BENCH_COMPILE_ONLY: scripts/test.sh builds them at -O0, issue
/// 32): its figures would measure -O0 code. Every measuring program calls this first.
inline void refuse_compile_only_build([[maybe_unused]] const char* program) {
#if defined(COHORT_BENCH_COMPILE_ONLY)
  std::fprintf(stderr,
               "%s: this build only checks that the benchmarks compile (COHORT_BENCH_COMPILE_ONLY=ON, "
               "as scripts/test.sh configures build/): it is -O0 code and would measure nothing. Build "
               "the benchmarks in a Release tree:\n  cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release "
               "-DCOHORT_BUILD_TESTS=OFF && cmake --build build-bench --target %s\n"
               "and point the benchmark drivers at that tree (their --cohort or --build option).\n",
               program, program);
  std::exit(2);
#endif
}

/// Peak resident set size of this process in MiB (VmHWM), or -1 where /proc is unavailable.
inline double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

} // namespace cohort::bench
