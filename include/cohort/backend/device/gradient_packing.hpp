#pragma once
/// \file
/// Gradient compression on a device backend: float gradients to their 16-bit wire format and
/// back, as Thrust kernels, for the device engines of ProcessGroupDDP.
///
///     device::pack_gradients(policy, GradientCompression::bf16, grads, wire, n, residual);
///     // ... the wire values summed across ranks (ncclAllReduce on ncclBfloat16, or MPI) ...
///     device::unpack_gradients(policy, GradientCompression::bf16, wire, grads, n);
///
/// Each element is rounded by parallel/gradient_compression.hpp's host/device functions, so a
/// device packs bit for bit as the CPU engine does. `residual` (or nullptr) is error feedback:
/// it is added before rounding and then holds what the rounding dropped. `policy` says where
/// the kernels run: a context's policy(), or a stream's (NCCL packs on its communication stream).

#include <cstddef>
#include <cstdint>

#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/core/macros.hpp"
#include "cohort/parallel/gradient_compression.hpp"

namespace cohort::device {

namespace detail {
struct PackGradient {
  GradientCompression compression;
  const float* g;
  std::uint16_t* wire;
  float* residual;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    wire[i] = cohort::detail::pack_gradient(compression, g[i], residual ? residual + i : nullptr);
  }
};
struct UnpackGradient {
  GradientCompression compression;
  const std::uint16_t* wire;
  float* g;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const { g[i] = cohort::detail::from_wire(compression, wire[i]); }
};
} // namespace detail

/// wire[i] = g[i] (+ residual[i]) rounded to `c`, for i in [0, n); residual (if not null) then
/// holds what the rounding dropped. All pointers are device pointers.
template <class Policy>
void pack_gradients(Policy&& policy, GradientCompression c, const float* g, std::uint16_t* wire, std::size_t n,
                    float* residual) {
  for_each_index(policy, n, detail::PackGradient{c, g, wire, residual});
}

/// g[i] = the float value of wire[i] (exact), for i in [0, n).
template <class Policy>
void unpack_gradients(Policy&& policy, GradientCompression c, const std::uint16_t* wire, float* g, std::size_t n) {
  for_each_index(policy, n, detail::UnpackGradient{c, wire, g});
}

} // namespace cohort::device
