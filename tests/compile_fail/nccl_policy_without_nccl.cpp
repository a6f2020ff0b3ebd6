// ProcessGroupDDP<Nccl, Cuda> without CUDA and NCCL: a message, not a link error.
// expect: ProcessGroupDDP<Nccl, Cuda> needs CUDA and NCCL
// expect: #include <cohort/parallel/nccl.cuh>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/process_group_ddp.hpp>
using namespace cohort;
Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Nccl, Cuda>> trainer(Sgd({.lr = 0.1}));
