// The device trainer on the CPU (ThrustDevice on Thrust's OpenMP system): the code path a GPU
// runs, executed here. See train_on_device.hpp.
#include <cohort/backend/thrust_device.hpp>

#include "train_on_device.hpp"

int main(int argc, char** argv) {
  try {
    return train_on_device<cohort::ThrustDevice>(parse_device_train_options(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_on_device_omp: %s\n", e.what());
    return 1;
  }
}
