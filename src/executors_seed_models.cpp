// The compiled kernel library's executors of models A-D (network/compiled_executor.hpp), in every
// precision. Built with COHORT_COMPILED_KERNELS as a consumer is: their kernels come from the
// library's own chunks (src/cpu_kernels_N.cpp), not compiled again here.
#define COHORT_COMPILED_KERNELS 1
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/mixed_precision.hpp>

COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::ModelA)
COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::ModelB)
COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::ModelC)
COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::ModelD)
