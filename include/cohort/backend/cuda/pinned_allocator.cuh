#pragma once
/// \file
/// Page-locked host memory for HostBuffer: what the Trainer stages batches in on the Cuda
/// backend (seed 001's pin_memory), so their copies to the GPU are DMA transfers that run
/// asynchronously on the replica's stream.
///
///     HostBuffer<float, gpu::PinnedAllocator> staging(batch * 784);

#include <cstddef>

#include <cuda_runtime_api.h>

#include "cohort/backend/cuda/error.cuh"

namespace cohort::gpu {

struct PinnedAllocator {
  static void* allocate(std::size_t bytes) {
    int device = 0;
    (void)cudaGetDevice(&device); // for the error message only
    void* p = nullptr;
    // Portable: page-locked for every GPU of the process (ThreadedReplicas copies from one buffer
    // to all of them).
    COHORT_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), device);
    return p;
  }
  static void deallocate(void* p, std::size_t) noexcept { (void)cudaFreeHost(p); }
};

} // namespace cohort::gpu
