// Model A with the first Linear one column short: the error names layer 7 and both shapes.
// expect: Sequential: layer Index cannot take the output of the layer before it
// expect: Index = 7
// expect: LayerType = cohort::Linear<4600, 64>
// expect: Produced = cohort::Shape<4608>
// expect: Expected = cohort::expect::Vector<4600>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU, Conv2d<16, 32, 3>, ReLU, MaxPool2d<2>,
                       Dropout2d<0.10f>, Flatten, Linear<4600, 64>, ReLU, Dropout<0.25f>, Linear<64, 10>, LogSoftmax>;
static_assert(Bad::parameter_count > 0);
