// ProcessGroupDDP<Nccl, Cuda> in one process (MPI world of 1, NCCL communicator of 1): the device
// DDP engine with NCCL for the gradients trains like SingleDevice<Cuda>. The same engine runs on
// the CPU in CI as ProcessGroupDDP<Mpi, ThrustDevice> under mpirun (tests/mpi/ddp_device_check.cpp);
// `mpirun -np <GPUs> cohort_cuda_tests -tc="*ProcessGroupDDP*"` runs it across GPUs: every rank
// checks that all ranks hold the same weights and that they match one GPU on the global batch.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include <mpi.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/nccl.cuh>

#include "support/bands.hpp"
#include "support/compare.hpp"

using namespace cohort;

namespace {
/// FNV-1a of the weights' bytes: equal on every rank when the ranks hold the same weights.
std::uint64_t weights_hash(const std::vector<float>& w) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(w.data());
  for (std::size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
} // namespace

TEST_CASE("ProcessGroupDDP<Nccl, Cuda>: trains like SingleDevice<Cuda> on the global batch, every rank alike") {
  const test::Bands data(128, 1);
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  TrainerOptions o{.batch_size = 32, .seed = 11, .log = nullptr};
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Nccl, Cuda>> ddp(sgd, o);
  ddp.fit(data, 2);
  const std::vector<float> a(ddp.parameters().values.begin(), ddp.parameters().values.end());
  const std::size_t world = ddp.world_size();
  if (world > 1) { // under mpirun: every rank must hold the same weights after the last step
    const unsigned long long mine = weights_hash(a);
    unsigned long long lowest = 0, highest = 0;
    REQUIRE(MPI_Allreduce(&mine, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS);
    REQUIRE(MPI_Allreduce(&mine, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK_MESSAGE(lowest == highest, "rank " << ddp.rank() << ": the ranks' weights differ after training");
  }
  // Each rank of 32 is a shard of a global batch of 32 x world (model C has no BatchNorm: the
  // mean of the ranks' means is the global batch's mean, up to rounding).
  TrainerOptions global = o;
  global.batch_size = 32 * world;
  Trainer<models::ModelC, Sgd<>, SingleDevice<Cuda>> one(sgd, global);
  one.fit(data, 2);
  const std::vector<float> b(one.parameters().values.begin(), one.parameters().values.end());
  COHORT_CHECK_CLOSE(a, b, 1e-5, "ProcessGroupDDP<Nccl, Cuda> vs SingleDevice<Cuda> on the global batch");
}
