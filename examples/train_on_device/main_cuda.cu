// The device trainer on a GPU: SingleDevice<Cuda>. See train_on_device.hpp; the models are in
// their own units (model.in).
#include <cstdio>
#include <exception>

#include <cuda_runtime_api.h>

#include "options.hpp"

int main(int argc, char** argv) {
  try {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      std::fprintf(stderr, "train_on_device_cuda: no CUDA device visible to this process\n");
      return 1;
    }
    return train_on_device(parse_device_train_options(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_on_device_cuda: %s\n", e.what());
    return 1;
  }
}
