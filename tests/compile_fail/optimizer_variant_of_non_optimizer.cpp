// An OptimizerVariant alternative that is not an optimiser.
// expect: OptimizerVariant: every alternative must be an optimiser
#include <cohort/optim/optimizer_variant.hpp>
#include <cohort/optim/sgd.hpp>
cohort::OptimizerVariant<cohort::Sgd<>, int> v(cohort::Sgd<>{});
