#pragma once
// What every chunk of the compiled kernel library (src/cpu_kernels_N.cpp) includes: the kernel
// definitions and the list of instantiations. The library is built without
// COHORT_COMPILED_KERNELS (that is its consumers' macro), so nothing is declared extern here.
#include <cohort/backend/cpu.hpp>
#include <cohort/backend/cpu/compiled_instances.hpp>

#if defined(COHORT_COMPILED_KERNELS)
#error "src/cpu_kernels_N.cpp instantiates the kernels: build it without COHORT_COMPILED_KERNELS"
#endif
#define COHORT_DETAIL_INSTANTIATE_KERNEL(...) template __VA_ARGS__;
