#pragma once
/// \file
/// Portability macros shared by host and device code.

/// Functions callable from host and device code (element rules, random numbers).
#if defined(__CUDACC__)
#define COHORT_HOST_DEVICE __host__ __device__
#else
#define COHORT_HOST_DEVICE
#endif

/// Element rules are always inlined into the loop that runs them, so they take that loop's
/// instruction set (AVX-512, AVX2, baseline, or device code).
#if defined(__CUDACC__)
#define COHORT_RULE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define COHORT_RULE inline __attribute__((always_inline))
#else
#define COHORT_RULE inline
#endif

/// Before a loop whose iterations are independent (each writes its own element): lets the host
/// compiler's vectoriser take it even at -O1, where GCC vectorises nothing else (`omp simd`
/// under OpenMP, as the CPU device systems are built). Never a reduction: each lane keeps its
/// own element's order of operations, so the results are those of the plain loop.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define COHORT_SIMD_LOOP _Pragma("omp simd")
#else
#define COHORT_SIMD_LOOP
#endif
