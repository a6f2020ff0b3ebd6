// A network on the Cuda backend without its header: the message names the header.
// expect: Network: the Cuda backend needs CUDA
#include <cohort/cohort.hpp>
using namespace cohort;
Network<Sequential<Input<4>, Linear<4, 2>>, float, Cuda> net;
