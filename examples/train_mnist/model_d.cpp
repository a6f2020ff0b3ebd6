// train_mnist for model D (its own translation unit so the models compile in parallel).
#include <cohort/models/seed_models.hpp>

#include "run.hpp"

int train_model_d(const TrainMnistOptions& o) { return train_mnist::run<cohort::models::ModelD>(o); }
