#pragma once
// Small helpers shared by the benchmark programs.

#include <cstdio>
#include <fstream>
#include <string>

namespace cohort::bench {

/// Peak resident set size of this process in MiB (VmHWM), or -1 where /proc is unavailable.
inline double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

} // namespace cohort::bench
