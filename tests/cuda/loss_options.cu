// loss_options cases (tests/backend/device/loss_options_cases.hpp) on the Cuda backend: the
// kernels the CPU runs in CI (ThrustDevice on OpenMP), here launched on a GPU.
#include <cohort/backend/cuda.cuh>
namespace {
using Dev = cohort::Cuda;
}
#include "backend/device/loss_options_cases.hpp"
