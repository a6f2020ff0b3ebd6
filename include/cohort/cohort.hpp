#pragma once
/// \file
/// The umbrella header: layers, networks, the reference models (models::ModelA-D, ResNet20),
/// losses, optimisers, data, the trainer with its default policies, checkpoints and the CPU
/// backend (with the compiled kernels' declarations in compiled mode: backend/cpu/compiled_kernels.hpp).
///
///     #include <cohort/cohort.hpp>
///     using Net = cohort::Sequential<cohort::Input<1, 28, 28>, cohort::Flatten, cohort::Linear<784, 10>>;
///
/// Optional engines (MPI, CUDA, NCCL) have their own headers and are never included from here.

#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"
#include "cohort/core/random.hpp"
#include "cohort/core/shape.hpp"

#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/avg_pool2d.hpp"
#include "cohort/layers/batch_norm1d.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/concat.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/conv_transpose2d.hpp"
#include "cohort/layers/depthwise_conv2d.hpp"
#include "cohort/layers/dropout.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/gated.hpp"
#include "cohort/layers/gelu.hpp"
#include "cohort/layers/group_norm.hpp"
#include "cohort/layers/hardsigmoid.hpp"
#include "cohort/layers/hardswish.hpp"
#include "cohort/layers/leaky_relu.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/relu6.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/layers/sigmoid.hpp"
#include "cohort/layers/silu.hpp"
#include "cohort/layers/squeeze_excitation.hpp"
#include "cohort/layers/tanh.hpp"
#include "cohort/layers/upsample.hpp"

#include "cohort/network/executor.hpp"
#include "cohort/network/network.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/predict.hpp"
#include "cohort/network/sequential.hpp"

#include "cohort/models/resnet.hpp"
#include "cohort/models/seed_models.hpp"

#include "cohort/loss/cross_entropy_loss.hpp"
#include "cohort/loss/nll_loss.hpp"

#include "cohort/optim/adadelta.hpp"
#include "cohort/optim/adam.hpp"
#include "cohort/optim/clip_grad_norm.hpp"
#include "cohort/optim/lookahead.hpp"
#include "cohort/optim/parameter_groups.hpp"
#include "cohort/optim/rmsprop.hpp"
#include "cohort/optim/sgd.hpp"

#include "cohort/io/safetensors.hpp"

#include "cohort/data/augment.hpp"
#include "cohort/data/cifar.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/dataset.hpp"
#include "cohort/data/idx.hpp"
#include "cohort/data/image_view.hpp"
#include "cohort/data/sampler.hpp"

#include "cohort/parallel/single_device.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/trainer.hpp"

#include "cohort/backend/cpu.hpp"
