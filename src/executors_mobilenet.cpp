// The compiled kernel library's executors of MobileNetV2-small (network/compiled_executor.hpp), in
// every precision. Built with COHORT_COMPILED_KERNELS as a consumer is: its kernels come from the
// library's own chunks (src/cpu_kernels_N.cpp), not compiled again here.
#define COHORT_COMPILED_KERNELS 1
#include <cohort/cohort.hpp>
#include <cohort/models/mobilenet_v2.hpp>
#include <cohort/precision/mixed_precision.hpp>

COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::MobileNetV2Small<>)
