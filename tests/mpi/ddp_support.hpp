#pragma once
// What the mpirun programs (ddp_check, ddp_device_check) share: the rank and world size, the
// weights as a vector, and the check that every rank holds the same weights.

#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include <mpi.h>

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

} // namespace cohort::test
