// SingleDevice<Cuda> in a build without CUDA: a message that says what to do, not a link error.
// expect: Trainer: the Cuda backend
// expect: needs CUDA: compile with nvcc, #include <cohort/backend/cuda.cuh>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
using namespace cohort;
Trainer<models::ModelC, Sgd<>, SingleDevice<Cuda>> trainer(Sgd({.lr = 0.1}));
