// Groups that do not divide the channels (torch: "in_channels must be divisible by groups"): the
// error names the three numbers.
// expect: Conv2d: InChannels and OutChannels must both be divisible by Groups
// expect: InChannels = 6; long unsigned int OutChannels = 8; long unsigned int Groups = 4
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<6, 8, 8>, Conv2d<6, 8, 3, 1, 1, Groups{4}>>;
Network<Bad> net;
