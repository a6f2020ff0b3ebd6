// expect: MaxPool2d: Kernel is larger than the padded input image
// expect: cohort::MaxPool2d<4>::bind<cohort::Shape<8, 3, 3> >
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<8, 3, 3>, MaxPool2d<4>>;
static_assert(Bad::layer_count == 1);
