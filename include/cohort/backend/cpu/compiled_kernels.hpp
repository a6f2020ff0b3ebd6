#pragma once
/// \file
/// Compiled mode (issue 32): the CPU kernels of the networks src/kernel_registry.cpp lists are
/// compiled once into the cohort::kernels library, and a translation unit built with
/// COHORT_COMPILED_KERNELS (which linking cohort::kernels defines) declares them `extern
/// template` here instead of instantiating them: it then compiles no kernel of those networks
/// (fmt's compiled library vs FMT_HEADER_ONLY, spdlog's SPDLOG_COMPILED_LIB).
///
///     target_link_libraries(app PRIVATE cohort::kernels)   # instead of cohort::cohort
///
/// Any other geometry (a network of the user's own) still compiles its kernels in the unit that
/// uses it, exactly as header-only: both modes run the same code. Without the macro this header
/// declares nothing.

#include "cohort/backend/cpu/batch_norm.hpp"
#include "cohort/backend/cpu/conv2d.hpp"
#include "cohort/backend/cpu/linear.hpp"
#include "cohort/backend/cpu/pool.hpp"

#if defined(COHORT_COMPILED_KERNELS)
#include "cohort/backend/cpu/compiled_instances.hpp"

// (At global scope: the generated signatures are fully qualified.)
#define COHORT_DETAIL_EXTERN_KERNEL(...) extern template __VA_ARGS__;
COHORT_CPU_KERNEL_INSTANCES_0(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_1(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_2(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_3(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_4(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_5(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_6(COHORT_DETAIL_EXTERN_KERNEL)
COHORT_CPU_KERNEL_INSTANCES_7(COHORT_DETAIL_EXTERN_KERNEL)
#undef COHORT_DETAIL_EXTERN_KERNEL
static_assert(COHORT_CPU_KERNEL_CHUNKS == 8, "compiled_kernels.hpp: declare every chunk of compiled_instances.hpp");
#endif
