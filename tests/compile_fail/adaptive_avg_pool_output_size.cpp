// AdaptiveAvgPool2d implements global average pooling only: another output size says what to use.
// expect: AdaptiveAvgPool2d: only OutputSize 1 \(global average pooling\) is implemented
// expect: use AvgPool2d<Kernel, Stride> for other output sizes
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<8, 14, 14>, AdaptiveAvgPool2d<7>>;
static_assert(Bad::layer_count == 1);
