#pragma once
/// \file
/// The host memory a Trainer stages batches in before they reach Backend's memory:
/// Backend::staging_allocator where it names one (page-locked memory for Cuda), aligned operator
/// new otherwise; and whether gathering them ahead on a thread pays.

#include "cohort/backend/ops.hpp"
#include "cohort/tensor/buffer.hpp"
#include "cohort/train/trainer_options.hpp"

namespace cohort::detail {

template <class Backend>
struct staging_allocator {
  using type = AlignedAllocator;
};
template <class Backend>
requires requires { typename Backend::staging_allocator; }
struct staging_allocator<Backend> {
  using type = typename Backend::staging_allocator;
};

/// Whether a Trainer gathers its next batch on a background thread (TrainerOptions::prefetch).
/// Device backends overlap every gather (and its copy) with the step. On the CPU the step keeps
/// every core busy, so a background gather only pays when it does more than copy (measured on
/// 2 cores, 3 alternating pairs: plain copies 3% slower on model C, inside the VM's noise;
/// crop + flip 2% faster on ResNet-20 in every pair).
template <class Backend>
bool prefetch_pays(const TrainerOptions& o) noexcept {
  if constexpr (host_memory_backend<Backend>)
    return o.prefetch && !o.augment.empty();
  else
    return o.prefetch;
}

} // namespace cohort::detail
