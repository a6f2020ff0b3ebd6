// threaded replicas cases (tests/backend/device/threaded_replicas_cases.hpp) on the Cuda backend:
// one replica per GPU, gradients summed by NCCL (built when cohort::nccl exists; the cases need
// at least 3 GPUs for the 3-replica run and skip otherwise).
#include <cohort/parallel/nccl.cuh>
namespace {
using Dev = cohort::Cuda;
}
#define COHORT_TEST_DEVICE_COUNT cohort::cuda_device_count()
#include "backend/device/threaded_replicas_cases.hpp"
