// loss_options engine cases (tests/backend/device/loss_options_engine_cases.hpp) on the Cuda
// backend (the replica case needs NCCL and stays on ThrustDevice).
#include <cohort/backend/cuda.cuh>
namespace {
using Dev = cohort::Cuda;
}
#include "backend/device/loss_options_engine_cases.hpp"
