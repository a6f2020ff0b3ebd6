// mixed precision cases (mixed_precision_cases.hpp) on the ThrustDevice backend: the device
// kernels in 16 bits on Thrust's OpenMP system. tests/cuda/ runs the same cases on a GPU.
#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/mixed_precision_cases.hpp"
