#pragma once
/// \file
/// Compiled mode (issue 32): the executors (the forward and backward passes over a network's
/// layers, network/executor.hpp) of the networks the kernel library registers are compiled once
/// into cohort::kernels, as their kernels are (backend/cpu/compiled_kernels.hpp): in every
/// precision, on the CPU, for every engine (the backward hook is a BackwardHook, not a type).
///
/// Example (not compiled: at global scope, as models/*.hpp and src/executors_*.cpp use it):
///
///     COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ModelA)   // a declaration
///     COHORT_DETAIL_COMPILED_NETWORK(, cohort::models::ModelA)         // the library's definition
///
/// models/seed_models.hpp and models/resnet.hpp declare their networks' executors this way where
/// COHORT_COMPILED_KERNELS is defined; src/executors_*.cpp define them. Those executors then
/// compile none of their layers' code in the user's unit (about a third of a compiled-mode unit
/// that trains ResNet-20).

#include "cohort/backend/cpu.hpp" // the layers' CPU states (their kernels' workspaces)
#include "cohort/core/dtype.hpp"
#include "cohort/network/executor.hpp"

// (At global scope: the names are qualified.)
#define COHORT_DETAIL_EXECUTOR_INSTANCE(PREFIX, NET, T) PREFIX template class cohort::Executor<NET, T, cohort::Cpu>;
#define COHORT_DETAIL_COMPILED_NETWORK(PREFIX, NET)                                                                    \
  COHORT_DETAIL_EXECUTOR_INSTANCE(PREFIX, NET, float)                                                                  \
  COHORT_DETAIL_EXECUTOR_INSTANCE(PREFIX, NET, cohort::bfloat16)                                                       \
  COHORT_DETAIL_EXECUTOR_INSTANCE(PREFIX, NET, cohort::half)
