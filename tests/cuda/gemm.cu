// gemm cases (tests/backend/device/gemm_cases.hpp) on the Cuda backend: the kernels the
// CPU runs in CI (ThrustDevice on OpenMP), here launched on a GPU with cuBLAS GEMMs.
#include <cohort/backend/cuda.cuh>
namespace {
using Dev = cohort::Cuda;
}
#include "backend/device/gemm_cases.hpp"
