// threaded replicas cases (threaded_replicas_cases.hpp) on the ThrustDevice backend: the device
// kernels on Thrust's OpenMP system, i.e. on this machine's CPU cores. tests/cuda/ runs the same
// cases on GPUs (NCCL).
#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/threaded_replicas_cases.hpp"
