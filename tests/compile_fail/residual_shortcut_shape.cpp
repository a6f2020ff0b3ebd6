// A block whose body halves the image (stride 2) while its shortcut keeps it: the branches cannot
// be added; the error names the block and both shapes.
// expect: Residual: the body and the shortcut of the block at BlockIndex .* produce different shapes
// expect: Where = (cohort::detail::)?in_sequential; long unsigned int BlockIndex = 1
// expect: BodyShape = cohort::Shape<16, 4, 4>
// expect: ShortcutShape = cohort::Shape<16, 8, 8>
#include <cohort/cohort.hpp>
#include <cohort/layers/residual.hpp>
using namespace cohort;
using Block = Residual<Branch<Conv2d<8, 16, 3, 2, 1>, ReLU>, Branch<Conv2d<8, 16, 1>>>;
using Bad = Sequential<Input<8, 8, 8>, ReLU, Block>;
Network<Bad> net;
