#pragma once
// Command-line options of train_mnist, shared by its translation units (one per model, so the
// four instantiations compile in parallel).

#include <cstddef>
#include <cstdint>
#include <string>

struct TrainMnistOptions {
  std::string model = "A"; // A, B, C, D, resnet, fast or mobilenet
  std::size_t epochs = 2;
  std::size_t batch_size = 0; // 0: the seed notebook's (100 for B, 128 otherwise)
  double lr = -1;             // < 0: the seed notebook's
  std::string optimizer;      // empty: the seed notebook's
  double momentum = 0;
  double weight_decay = -1; // < 0: the optimiser's default (0; AdamW 0.01)
  bool nesterov = false;
  bool no_decay_on_norms = false; // parameter groups: no weight decay on BatchNorm and biases
  double bn_bias_lr_scale = 1;    // parameter groups: BatchNorm biases at this multiple of the rate
  double target_accuracy = 0;     // > 0: stop after the first epoch whose test accuracy reaches it (%)
  double clip_grad_norm = 0;      // 0: no clipping
  std::string freeze;             // "below:N" or state_dict prefixes "0,1,3" (fine-tuning); empty: none
  double ema = 0;                 // weight average's decay (TrainerOptions::ema); 0: none
  std::size_t ema_every = 1;      // its update interval in optimiser steps
  std::size_t lookahead_k = 0;    // Lookahead around SGD or Adam: synchronise every k steps; 0: none
  double lookahead_alpha = 0.5;   // its step toward the fast weights
  std::string tta = "none";       // test-time augmentation of evaluation and export-free prediction: none | flip
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::uint64_t seed = 0;
  std::size_t threads = 0; // 0: every core this process may use (cohort::available_cores())
  std::string metrics, save, init_from, resume;
  std::string export_onnx; // write the trained network as ONNX (eval mode) to this file
  std::uint64_t max_steps = 0;
  bool no_shuffle = false;
  bool no_prefetch = false; // gather batches on the training threads, not on a background one
  std::size_t repeat = 1;
  std::size_t log_interval = 10;
  std::size_t eval_batch_size = 1000;
  std::string parallel = "single"; // single | threads | ddp
  std::size_t replicas = 2;        // --parallel threads
  bool deterministic = false;
  std::size_t chunks = 4;
  std::size_t bucket_kib = 1024;
  std::string compress = "none"; // none | bf16 | fp16: gradient buckets on the wire (--parallel ddp)
  bool error_feedback = false;
  double timeout = 300;
  std::size_t accumulation = 1;
  std::string precision = "fp32"; // fp32 | fp16 | bf16
  std::string lr_schedule;        // LrSchedule::parse syntax; empty: none
  bool schedule_per_step = false;
  std::string augment;        // parse_augmentation syntax ("crop=4,flip"); empty: none
  double label_smoothing = 0; // CrossEntropyLoss's (models B, C, D, resnet)
  std::string class_weights;  // "w0,w1,...,w9"; empty: none
};

// One translation unit per model (generated from model.cpp.in), so the models compile in
// parallel; each defines the model's three precisions.
// clang-format off
#define TRAIN_MNIST_FOR_EACH(X)          \
  X(a, fp32) X(a, fp16) X(a, bf16)       \
  X(b, fp32) X(b, fp16) X(b, bf16)       \
  X(c, fp32) X(c, fp16) X(c, bf16)       \
  X(d, fp32) X(d, fp16) X(d, bf16)       \
  X(resnet, fp32) X(resnet, fp16) X(resnet, bf16) \
  X(fast, fp32) X(fast, fp16) X(fast, bf16)       \
  X(mobilenet, fp32) X(mobilenet, fp16) X(mobilenet, bf16)
// clang-format on
#define TRAIN_MNIST_DECLARE(model, precision) int train_model_##model##_##precision(const TrainMnistOptions&);
TRAIN_MNIST_FOR_EACH(TRAIN_MNIST_DECLARE)
#undef TRAIN_MNIST_DECLARE
