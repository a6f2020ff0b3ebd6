// Inside the body of the block at position 2, the layer at position 3 expects 4 channels but the
// body's convolution before it made 8: the error names the block, the branch, the position and both shapes.
// expect: Residual: layer Index of a branch cannot take the output of the layer before it
// expect: Where = (cohort::detail::)?in_block<2, cohort::branch::body, (cohort::detail::)?in_sequential>
// expect: Index = 3
// expect: LayerType = cohort::Conv2d<4, 8, 3, 1, 1>
// expect: Produced = cohort::Shape<8, 8, 8>
// expect: Expected = cohort::expect::Image<4>
#include <cohort/cohort.hpp>
#include <cohort/layers/residual.hpp>
using namespace cohort;
using Block = Residual<Branch<Conv2d<4, 8, 3, 1, 1>, BatchNorm2d<8>, ReLU, Conv2d<4, 8, 3, 1, 1>>>;
using Bad = Sequential<Input<1, 8, 8>, Conv2d<1, 4, 3, 1, 1>, ReLU, Block>;
Network<Bad> net;
