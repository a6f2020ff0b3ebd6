// float is not a 16-bit storage type.
// expect: MixedPrecision<H>: float and double are not mixed precision; use FullPrecision
#include <cohort/precision/mixed_precision.hpp>
cohort::MixedPrecision<float> policy;
