// Models A-D against PyTorch from the same (cohort-initialised) weights: forward output, input
// gradient and every parameter gradient of the first batch, the loss of 3 training steps with the
// seed's optimiser, and all parameters and buffers after them. Model A runs in training mode with
// cohort's dropout masks replayed in PyTorch.

#include <doctest/doctest.h>

#include "support/model_harness.hpp"

#include <cohort/models/seed_models.hpp>

using namespace cohort;
using namespace cohort::test;
using namespace cohort::models;

// The parameter counts of PyTorch's modules (sum(p.numel() for p in model.parameters())).
static_assert(ModelA::parameter_count == 300'426);
static_assert(std::is_same_v<ModelA::output_shape, Shape<10>>);
static_assert(ModelB::parameter_count == 29'034);
static_assert(ModelC::parameter_count == 402'442);
static_assert(ModelD::parameter_count == 4'104'202);

TEST_CASE("Model A (seed 000): matches PyTorch over 3 Adadelta steps, dropout on") {
  check_model<ModelA, NllLoss<>>("A", Adadelta({.lr = 0.5}));
}
TEST_CASE("Model B (seed 001): matches PyTorch over 3 SGD steps, BatchNorm in training mode") {
  check_model<ModelB, CrossEntropyLoss<>>("B", Sgd({.lr = 0.01, .momentum = 0.9}), 0.0, {"0.bias", "4.bias"});
}
TEST_CASE("Model C (seed 003 small): matches PyTorch over 3 Adam steps") {
  check_model<ModelC, CrossEntropyLoss<>>("C", Adam({.lr = 1e-3, .eps = 1e-7}), adam_after_lr_fraction * 1e-3);
}
TEST_CASE("Model D (seed 003 large): matches PyTorch over 3 Adam steps") {
  check_model<ModelD, CrossEntropyLoss<>>("D", Adam({.lr = 1e-3, .eps = 1e-7}), adam_after_lr_fraction * 1e-3);
}
