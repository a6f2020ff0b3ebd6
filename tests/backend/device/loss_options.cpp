// loss_options cases (loss_options_cases.hpp) on the ThrustDevice backend: the device kernels on
// Thrust's OpenMP system, i.e. on this machine's CPU cores. tests/cuda/ runs the same cases on a GPU.
#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/loss_options_cases.hpp"
