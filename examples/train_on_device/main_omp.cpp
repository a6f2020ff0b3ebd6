// The device trainer on the CPU (ThrustDevice on Thrust's OpenMP system): the code path a GPU
// runs, executed here. See train_on_device.hpp; the models are in their own units (model.in).
#include <cstdio>
#include <exception>

#include "options.hpp"

int main(int argc, char** argv) {
  try {
    return train_on_device(parse_device_train_options(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_on_device_omp: %s\n", e.what());
    return 1;
  }
}
