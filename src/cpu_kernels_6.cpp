// Chunk 6 of the compiled kernel library (cohort::kernels): explicit instantiations of the CPU
// kernel entry points listed in include/cohort/backend/cpu/compiled_instances.hpp.
#include "cpu_kernels.hpp"

COHORT_CPU_KERNEL_INSTANCES_6(COHORT_DETAIL_INSTANTIATE_KERNEL)
