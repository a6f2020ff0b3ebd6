// The device trainer on a GPU: SingleDevice<Cuda>. See train_on_device.hpp.
#include <cohort/backend/cuda.cuh>

#include "train_on_device.hpp"

int main(int argc, char** argv) {
  try {
    if (cohort::cuda_device_count() == 0) {
      std::fprintf(stderr, "train_on_device_cuda: no CUDA device visible to this process\n");
      return 1;
    }
    return train_on_device<cohort::Cuda>(parse_device_train_options(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_on_device_cuda: %s\n", e.what());
    return 1;
  }
}
