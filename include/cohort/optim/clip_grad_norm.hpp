#pragma once
/// \file
/// torch.nn.utils.clip_grad_norm_ for hand-written loops: scales the gradients so that their
/// global L2 norm is at most `max_norm`, and returns the norm before clipping.
/// Example (compiled: tests/docs/headers.cpp, "optim/clip_grad_norm"):
///
///     double norm = cohort::clip_grad_norm(net.gradients().values.span(), /*max_norm=*/1.0);
///     opt.step(net);
///
/// Optimisers do the same inside step() with set_max_grad_norm (what the Trainer uses: the
/// engines clip the summed, unscaled gradients, so every replica and rank clips alike). Both go
/// through the same arithmetic: the norm summed in double over fixed blocks (the same for any
/// thread count), the factor min(1, max_norm / (norm + 1e-6)) in float, as torch computes it.

#include <cmath>
#include <cstddef>
#include <span>

#include "cohort/backend/cpu/elementwise.hpp"
#include "cohort/core/error.hpp"

namespace cohort {

/// Clips `grads` (host memory; device engines clip through the optimiser) to global norm
/// `max_norm`; returns the norm before clipping (torch.nn.utils.clip_grad_norm_(params,
/// max_norm), error_if_nonfinite=False: a non-finite norm makes every gradient NaN, as torch's
/// does). Runs on `ctx`'s threads (default: the process's pool).
inline double clip_grad_norm(std::span<float> grads, double max_norm, CpuContext ctx = {}) {
  if (!(max_norm > 0) || !std::isfinite(max_norm))
    throw ValueError(detail::concat("clip_grad_norm: invalid max_norm: ", max_norm, " (expected a finite value > 0)"));
  const double norm = std::sqrt(ops::ElementwiseKernels<Cpu>::sum_of_squares(ctx, grads.data(), grads.size()));
  float coef = (1.f / (float(norm) + 1e-6f)) * float(max_norm); // torch: max_norm / t is t.reciprocal() * max_norm
  coef = coef < 1.f ? coef : 1.f;
  ctx.threads().parallel_for(grads.size(), ops::ElementwiseKernels<Cpu>::grain,
                             [g = grads.data(), coef](std::size_t lo, std::size_t hi) {
                               for (std::size_t i = lo; i < hi; ++i) g[i] *= coef;
                             });
  return norm;
}

} // namespace cohort
