// train_mnist for model B (its own translation unit so the models compile in parallel).
#include <cohort/models/seed_models.hpp>

#include "run.hpp"

int train_model_b(const TrainMnistOptions& o) { return train_mnist::run<cohort::models::ModelB>(o); }
