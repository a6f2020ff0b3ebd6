// ProcessGroupDDP<Mpi> selected without its engine header: a message, not a link error.
// expect: Trainer: this combination of parallel and precision policies is not available
// expect: ProcessGroupDDP<Mpi> needs #include <cohort/mpi.hpp>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/process_group_ddp.hpp>
#include <cohort/train/trainer.hpp>
using namespace cohort;
Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> trainer(Sgd({.lr = 0.1}));
