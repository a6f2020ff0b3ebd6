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
