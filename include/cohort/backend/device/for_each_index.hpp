#pragma once
/// \file
/// The one launch shape of the device backends: call a functor once per index in [0, n).
///
///     device::for_each_index(ctx.policy(), batch * G::out_size, MaxPoolForward<G, T>{...});
///
/// The functor's call operator is COHORT_HOST_DEVICE: under nvcc it runs as a CUDA kernel
/// (Thrust picks the launch configuration), under g++ with THRUST_DEVICE_SYSTEM_OMP as an
/// OpenMP loop over the same code.

#include <cstddef>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

namespace cohort::device {

template <class Policy, class F>
void for_each_index(Policy&& policy, std::size_t n, F f) {
  if (n == 0) return;
  thrust::for_each_n(policy, thrust::counting_iterator<std::size_t>(0), n, f);
}

} // namespace cohort::device
