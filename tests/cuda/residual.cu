// residual cases (tests/backend/device/residual_cases.hpp) on the Cuda backend.
#include <cohort/backend/cuda.cuh>
namespace {
using Dev = cohort::Cuda;
}
#include "backend/device/residual_cases.hpp"
