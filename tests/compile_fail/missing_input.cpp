// expect: Sequential: the first argument must declare the input, e.g. Input<1, 28, 28>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Conv2d<1, 16, 3>, ReLU>;
static_assert(Bad::layer_count == 1);
