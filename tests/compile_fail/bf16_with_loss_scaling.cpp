// Loss scaling asked for bf16, which has float's exponent range.
// expect: MixedPrecision<bf16, DynamicLossScale>: bf16 has float's exponent range and needs no loss scaling
#include <cohort/precision/mixed_precision.hpp>
cohort::MixedPrecision<cohort::bf16, cohort::DynamicLossScale> policy;
