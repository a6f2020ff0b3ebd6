// A Conv2d expecting 3 channels after a 1-channel input.
// expect: Sequential: layer Index cannot take the output of the layer before it
// expect: Index = 0
// expect: LayerType = cohort::Conv2d<3, 16, 3>
// expect: Produced = cohort::Shape<1, 28, 28>
// expect: Expected = cohort::expect::Image<3>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<3, 16, 3>, ReLU>;
Network<Bad> net;
