// A gate that keeps the image (no pooling): it cannot multiply channel by channel; the error
// names the block, its input and the gate's output.
// expect: Gated: the gate of the block at BlockIndex .* must map the block's input In
// expect: Where = (cohort::detail::)?in_sequential; long unsigned int BlockIndex = 1
// expect: In = cohort::Shape<8, 6, 6>
// expect: GateShape = cohort::Shape<8, 6, 6>
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<8, 6, 6>, ReLU, Gated<Branch<Conv2d<8, 8, 1>, Sigmoid>>>;
Network<Bad> net;
