#pragma once
/// \file
/// `ThrustDevice`: the device backend on whatever system Thrust is built for, with the reference
/// GEMM of backend/device/gemm.hpp. Compiled with g++ and
/// `-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP` (target cohort::device_omp) it runs every
/// device kernel on the CPU's cores: that is how CI executes the GPU code paths without a GPU.
/// On a GPU use `cohort::Cuda` (backend/cuda.cuh): the same kernels with cuBLAS and streams.
///
///     #include <cohort/backend/thrust_device.hpp>
///     cohort::Network<ModelA, float, cohort::ThrustDevice> net(seed);
///     cohort::DeviceBuffer<float> x;  x.assign_from_host(images.data(), images.size()); // on the device
///     auto logits = net.forward(cohort::ConstBatchView<cohort::Shape<1, 28, 28>, float>(x.data(), n));
///
/// Requires the CCCL headers (Thrust, libcu++): the CUDA Toolkit's include/cccl.

#include <memory>
#include <string>
#include <utility>

#include <thrust/execution_policy.h>

#include "cohort/backend/device/activation.hpp"
#include "cohort/backend/device/batch_norm.hpp"
#include "cohort/backend/device/caching_allocator.hpp"
#include "cohort/backend/device/conv2d.hpp"
#include "cohort/backend/device/conv_transpose2d.hpp"
#include "cohort/backend/device/depthwise_conv2d.hpp"
#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/elementwise.hpp"
#include "cohort/backend/device/errors.hpp"
#include "cohort/backend/device/gemm.hpp"
#include "cohort/backend/device/group_norm.hpp"
#include "cohort/backend/device/linear.hpp"
#include "cohort/backend/device/pool.hpp"
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/backend/device/softmax.hpp"
#include "cohort/backend/device/upsample.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

/// Run-time state of the ThrustDevice kernels: Thrust's device policy with a cache for the
/// algorithms' temporary storage. Copies of a context (the replica's, its loss's and optimiser's)
/// share the cache; a default-constructed context has its own.
struct ThrustDeviceContext {
  std::shared_ptr<device::CachingAllocator> temporaries = std::make_shared<device::CachingAllocator>();

  auto policy() const noexcept { return thrust::device(*temporaries); }
  template <class In, class Out>
  void gemm(const device::GemmArgs<In, Out>& g) const {
    device::thrust_gemm(policy(), g);
  }
  /// f(), with Thrust's errors (and failed allocations) rethrown as DeviceError naming `what`.
  template <class F>
  decltype(auto) translate_errors(const char* what, F&& f) const {
    return device::translate_thrust_errors<DeviceError>(
        what, [] { return std::string(" on the Thrust device system"); }, std::forward<F>(f));
  }
};

/// The backend tag: device memory (DeviceBuffer), kernels in backend/device/.
struct ThrustDevice {
  using context = ThrustDeviceContext;
  template <class U>
  using buffer = DeviceBuffer<U>;
  static constexpr const char* name = "thrust-device";
  /// Buffers are device memory: host code must copy (Parameters::copy_from, DeviceBuffer).
  static constexpr bool host_memory = false;
};

template <>
struct ops::Conv2dKernels<ThrustDevice> : device::Conv2dKernels<ThrustDevice> {};
template <>
struct ops::ConvTranspose2dKernels<ThrustDevice> : device::ConvTranspose2dKernels<ThrustDevice> {};
template <>
struct ops::DepthwiseConv2dKernels<ThrustDevice> : device::DepthwiseConv2dKernels<ThrustDevice> {};
template <>
struct ops::LinearKernels<ThrustDevice> : device::LinearKernels<ThrustDevice> {};
template <>
struct ops::PoolKernels<ThrustDevice> : device::PoolKernels<ThrustDevice> {};
template <>
struct ops::UpsampleKernels<ThrustDevice> : device::UpsampleKernels<ThrustDevice> {};
template <>
struct ops::GroupNormKernels<ThrustDevice> : device::GroupNormKernels<ThrustDevice> {};
template <>
struct ops::BatchNormKernels<ThrustDevice> : device::BatchNormKernels<ThrustDevice> {};
template <>
struct ops::ElementwiseKernels<ThrustDevice> : device::ElementwiseKernels<ThrustDevice> {};
template <>
struct ops::SoftmaxKernels<ThrustDevice> : device::SoftmaxKernels<ThrustDevice> {};
template <>
struct ops::ActivationKernels<ThrustDevice> : device::ActivationKernels<ThrustDevice> {};

} // namespace cohort
