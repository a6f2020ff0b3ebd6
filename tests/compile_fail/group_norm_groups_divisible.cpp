// Groups that do not divide the channels (torch: "num_channels must be divisible by num_groups"):
// the error says so and names both numbers.
// expect: GroupNorm: Channels must be divisible by Groups
// expect: GroupNorm<4, 6
#include <cohort/cohort.hpp>
using namespace cohort;
using Bad = Sequential<Input<6, 8, 8>, GroupNorm<4, 6>>;
Network<Bad> net;
