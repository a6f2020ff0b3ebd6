// A U-Net skip whose lower branch comes back at another size (pooled, never upsampled): the
// channels cannot be joined; the error names the block and both shapes.
// expect: Concat: the branches of the block at BlockIndex .* produce images of different height or width
// expect: Where = (cohort::detail::)?in_sequential; long unsigned int BlockIndex = 1
// expect: FirstShape = cohort::Shape<4, 8, 8>
// expect: SecondShape = cohort::Shape<6, 4, 4>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<4, 8, 8>, ReLU, Concat<Identity, Branch<MaxPool2d<2>, Conv2d<4, 6, 3, 1, 1>>>>;
Network<Bad> net;
