#pragma once
// What the mpirun programs (ddp_check, ddp_device_check) share: the rank and world size, the
// weights as a vector, the check that every rank holds the same weights, and the fault cases'
// harness (a rank stopped or killed inside a named collective, the survivors' report).

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <mpi.h>

#include <cohort/core/error.hpp>
#include <cohort/parallel/mpi_communicator.hpp>
#include <cohort/parallel/signature.hpp>

namespace cohort::test {

template <class Params>
std::vector<float> values(Params& p) {
  return {p.values.begin(), p.values.end()};
}

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Every rank holds the same weights (bitwise): their hashes agree. `program` prefixes the message.
inline int check_identical(const char* program, const std::vector<float>& w) {
  const std::uint64_t h = fnv1a(std::string_view(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (std::size_t p = 1; p < all.size(); ++p)
    if (all[p] != all[0]) {
      std::fprintf(stderr, "%s: rank %zu holds other weights than rank 0\n", program, p);
      return 1;
    }
  return 0;
}

/// A fault to inject: rank `rank` raises `signal` ("stop": SIGSTOP, "kill": SIGKILL) right after
/// it has started the first collective whose name contains `at` (at step `step`, or any step when
/// negative), having written the time to `stamp` (milliseconds since the epoch).
struct Fault {
  std::string signal, at, stamp;
  long long step = -1;
  int rank = 1;
  bool armed() const noexcept { return !signal.empty(); }
};

inline long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Installs `f` on its rank (cohort's collective_started_hook: a test seam of the communicator).
inline void arm(const Fault& f, const char* program) {
  if (!f.armed() || world_rank() != f.rank) return;
  detail::collective_started_hook() = [f, program](std::string_view what, std::uint64_t step) {
    if (what.find(f.at) == std::string_view::npos || (f.step >= 0 && step != std::uint64_t(f.step))) return;
    std::ofstream(f.stamp) << now_ms() << "\n";
    std::fprintf(stderr, "%s: rank %d stops (%s) inside %.*s at step %llu\n", program, f.rank,
                 f.signal == "kill" ? "SIGKILL" : "SIGSTOP", int(what.size()), what.data(),
                 static_cast<unsigned long long>(step));
    std::fflush(stderr);
    std::raise(f.signal == "kill" ? SIGKILL : SIGSTOP);
  };
}

/// A survivor's report of the error that stopped it, with how long after the fault it came
/// (run_ddp.cmake bounds it by the deadline).
inline void report_fault(const Fault& f, const char* program, const Error& e) {
  long long stopped = 0;
  if (std::ifstream in(f.stamp); in >> stopped)
    std::fprintf(stderr, "%s: rank %d: detected %lld ms after rank %d stopped\n", program, world_rank(),
                 now_ms() - stopped, f.rank);
  std::fprintf(stderr, "%s: %s\n", program, e.what());
}

} // namespace cohort::test
