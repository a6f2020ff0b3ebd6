// expect: Dropout: P must be in .0, 1.
// expect: Dropout2d: P must be in .0, 1.
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<10>, Dropout<1.5f>>;
using Bad2 = Sequential<Input<1, 4, 4>, Dropout2d<-0.1f>>;
static_assert(Bad::layer_count == 1 && Bad2::layer_count == 1);
