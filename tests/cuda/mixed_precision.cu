// mixed precision cases (tests/backend/device/mixed_precision_cases.hpp) on the Cuda backend:
// 16-bit weights and activations on a GPU, cuBLAS GEMMs with fp16/bf16 inputs and fp32 compute.
// The fp16 replica case needs NCCL and is left out here (the OpenMP build runs it).
#include <cohort/backend/cuda.cuh>
namespace {
using Dev = cohort::Cuda;
}
#define COHORT_MIXED_WITHOUT_REPLICAS
#include "backend/device/mixed_precision_cases.hpp"
