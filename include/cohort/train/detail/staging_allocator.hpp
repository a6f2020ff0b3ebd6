#pragma once
/// \file
/// The host memory a Trainer stages batches in before they reach Backend's memory:
/// Backend::staging_allocator where it names one (page-locked memory for Cuda), aligned operator
/// new otherwise.

#include "cohort/tensor/buffer.hpp"

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

} // namespace cohort::detail
