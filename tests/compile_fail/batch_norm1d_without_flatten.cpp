// BatchNorm1d directly after a convolution: it takes (Features) vectors, so a Flatten (and usually
// a Linear) is missing; the error names the position and both shapes.
// expect: Sequential: layer Index cannot take the output of the layer before it
// expect: Index = 2
// expect: LayerType = cohort::BatchNorm1d<4>
// expect: Produced = cohort::Shape<4, 26, 26>
// expect: Expected = cohort::expect::Vector<4>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<1, 4, 3, 1, 0, false>, ReLU, BatchNorm1d<4>>;
static_assert(Bad::layer_count == 3);
