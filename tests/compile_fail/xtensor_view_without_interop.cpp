// An xtensor view without the interop header (issue 32 keeps xtensor out of cohort.hpp): cohort's
// own assertion names the header to include.
// expect: #include <cohort/tensor/xtensor.hpp> to use them
#include <cohort/cohort.hpp>
using namespace cohort;
using Net = Sequential<Input<1, 8, 8>, Conv2d<1, 2, 3>>;
int main() {
  Network<Net> net(0);
  auto w = net.parameters().view<0, "weight">();
  (void)w;
}
