// expect: Conv2d: Stride must be at least 1
// expect: MaxPool2d: Stride must be at least 1
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3, 0>>;
using Bad2 = Sequential<Input<1, 28, 28>, MaxPool2d<2, 0>>;
static_assert(Bad::layer_count == 1 && Bad2::layer_count == 1);
