// Linear directly after a convolution: a Flatten is missing.
// expect: Sequential: layer Index cannot take the output of the layer before it
// expect: Index = 2
// expect: Produced = cohort::Shape<4, 26, 26>
// expect: Expected = cohort::expect::Vector<2704>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<1, 4, 3>, ReLU, Linear<2704, 10>>;
static_assert(Bad::layer_count == 3);
