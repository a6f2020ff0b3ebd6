// expect: Sequential: argument Index \(after the Input\) is not a layer
// expect: Index = 1
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<10>, ReLU, int>;
static_assert(Bad::layer_count == 2);
