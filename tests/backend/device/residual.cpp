// residual cases (residual_cases.hpp) on the ThrustDevice backend: the device kernels on Thrust's
// OpenMP system. tests/cuda/residual.cu runs the same cases on a GPU.
#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/residual_cases.hpp"
