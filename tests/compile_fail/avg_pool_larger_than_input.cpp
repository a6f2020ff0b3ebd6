// A 4x4 average-pooling window on a 3x3 image (no padding): the error names the pool and the shape.
// expect: AvgPool2d: Kernel is larger than the padded input image
// expect: cohort::AvgPool2d<4>::bind<cohort::Shape<8, 3, 3> >
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<8, 3, 3>, AvgPool2d<4>>;
static_assert(Bad::layer_count == 1);
