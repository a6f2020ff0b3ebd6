// A backend tag of one's own that defines a context but no op families: Network names the
// backend protocol and the first family missing.
// expect: does not satisfy cohort::BackendProtocol
// expect: Conv2dKernels<OwnBackend>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
using namespace cohort;
struct OwnBackend {
  using context = CpuContext;
  static constexpr const char* name = "own";
};
Network<models::ModelC, float, OwnBackend> net(0);
