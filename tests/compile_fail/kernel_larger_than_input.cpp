// expect: Conv2d: Kernel is larger than the padded input image
// expect: cohort::Conv2d<1, 16, 30>::bind<cohort::Shape<1, 28, 28> >
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 30>>;
static_assert(Bad::layer_count == 1);
