// ProcessGroupDDP<Nccl, Cuda> in one process (MPI world of 1, NCCL communicator of 1): the device
// DDP engine with NCCL for the gradients trains like SingleDevice<Cuda>. The same engine runs on
// the CPU in CI as ProcessGroupDDP<Mpi, ThrustDevice> under mpirun (tests/mpi/ddp_device_check.cpp);
// `mpirun -np <GPUs> cohort_cuda_tests -tc="*ProcessGroupDDP*"` runs it across GPUs.
#include <doctest/doctest.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/nccl.cuh>

#include "support/bands.hpp"
#include "support/compare.hpp"

using namespace cohort;

TEST_CASE("ProcessGroupDDP<Nccl, Cuda>: trains like SingleDevice<Cuda> (world of 1 per GPU count)") {
  const test::Bands data(128, 1);
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  TrainerOptions o{.batch_size = 32, .seed = 11, .log = nullptr};
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Nccl, Cuda>> ddp(sgd, o);
  ddp.fit(data, 2);
  if (ddp.world_size() != 1) { // under mpirun: each rank trains batches of 32 of its shard
    MESSAGE("world of " << ddp.world_size() << ": compared with one device only on a world of 1");
    return;
  }
  Trainer<models::ModelC, Sgd<>, SingleDevice<Cuda>> one(sgd, o);
  one.fit(data, 2);
  const std::vector<float> a(ddp.parameters().values.begin(), ddp.parameters().values.end());
  const std::vector<float> b(one.parameters().values.begin(), one.parameters().values.end());
  COHORT_CHECK_CLOSE(a, b, 1e-5, "ProcessGroupDDP<Nccl, Cuda> vs SingleDevice<Cuda>");
}
