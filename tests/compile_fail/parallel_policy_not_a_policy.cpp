// A type that is not a parallel policy in the Parallel slot.
// expect: Trainer: Parallel must be a parallel policy
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/train/trainer.hpp>
using namespace cohort;
struct NotAPolicy {};
Trainer<models::ModelC, Sgd<>, NotAPolicy> trainer(Sgd({.lr = 0.1}));
