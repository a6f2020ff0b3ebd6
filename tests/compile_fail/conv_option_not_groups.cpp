// An integer after Padding (torch's positional dilation, or groups written without Groups{}):
// neither the bias flag nor Groups, so it is refused rather than read as bias=true.
// expect: Conv2d: the arguments after Padding are the bias flag \(true or false, torch's bias=\) and Groups\{g\}
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<6, 8, 8>, Conv2d<6, 6, 3, 1, 1, 2>>;
Network<Bad> net;
