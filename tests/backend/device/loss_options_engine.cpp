// loss_options engine cases (loss_options_engine_cases.hpp) on the ThrustDevice backend: the
// device engines on Thrust's OpenMP system. tests/cuda/ runs the same cases on a GPU.
#include <cohort/backend/thrust_device.hpp>
namespace {
using Dev = cohort::ThrustDevice;
}
#include "backend/device/loss_options_engine_cases.hpp"
