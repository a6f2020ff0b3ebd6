// Links against cohort::mpi: MPI's headers and library come with the target, and so does
// COHORT_WITH_MPI=1.

#include <cstdio>

#include <mpi.h>

#include <cohort/cohort.hpp>

static_assert(COHORT_WITH_MPI == 1, "cohort::mpi (Conan) must define COHORT_WITH_MPI=1");

int main() {
  int version = 0, subversion = 0;
  MPI_Get_version(&version, &subversion); // callable before MPI_Init
  std::printf("cohort test_package_mpi: MPI %d.%d\n", version, subversion);
  return 0;
}
