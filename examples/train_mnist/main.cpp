// train_mnist: the seed notebooks' single-device training on Fashion-MNIST (or any MNIST-format
// directory), with cohort.
//
//   train_mnist                                   # model A, 2 epochs, Adadelta(0.5), as seed 000
//   train_mnist --model C --epochs 2 --metrics run.jsonl
//   train_mnist --max-steps 100 --save ckpt.safetensors && train_mnist --resume ckpt.safetensors
//   train_mnist --init-from torch_weights.safetensors --no-shuffle --max-steps 10   # step-by-step vs PyTorch
//   train_mnist --parallel threads --replicas 2                  # DataParallel: 2 replicas, 1 thread each
//   mpirun -np 2 train_mnist --parallel ddp                      # DistributedDataParallel over MPI
//   train_mnist --precision fp16                                 # Apex O2: fp16 model, fp32 master weights

#include <cctype>
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include <cohort/core/error.hpp>
#include <cohort/data/augment.hpp>
#include <cohort/loss/cross_entropy_options.hpp>
#include <cohort/optim/lr_schedule.hpp>

#include "options.hpp"

int main(int argc, char** argv) {
  TrainMnistOptions o;
  CLI::App app{"Train a seed model on Fashion-MNIST (or any MNIST-format directory) with cohort"};
  app.add_option("--model", o.model,
                 "A (seed 000), B (seed 001), C or D (seed 003 small/large), resnet (ResNet-20), fast (FastResNet, "
                 "the time-to-accuracy record network), mobilenet (MobileNetV2-small)")
      ->check(CLI::IsMember({"A", "B", "C", "D", "resnet", "fast", "mobilenet"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "epochs to train (in all, counting those before --resume)")
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "samples per step (default: the seed's, 100 for B, else 128)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", o.lr, "learning rate (default: the seed's: A 0.5, B 1e-4, C/D 1e-3)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--optimizer", o.optimizer, "sgd, adam, adamw, rmsprop or adadelta (default: the seed's)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "rmsprop", "adadelta"}));
  app.add_option("--momentum", o.momentum, "SGD / RMSprop momentum")->check(CLI::Range(0.0, 1.0));
  app.add_flag("--nesterov", o.nesterov, "SGD with Nesterov momentum (needs --momentum)");
  app.add_option("--weight-decay", o.weight_decay,
                 "weight decay: torch's weight_decay (L2 in the gradient; AdamW: decoupled, default 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--no-decay-on-norms", o.no_decay_on_norms,
               "parameter groups: no weight decay on BatchNorm parameters and biases");
  app.add_option("--bn-bias-lr-scale", o.bn_bias_lr_scale,
                 "parameter groups: train BatchNorm biases at this multiple of the learning rate (airbench's 64)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--target-accuracy", o.target_accuracy,
                 "stop after the first epoch whose test accuracy (%) is at or above this (a time-to-accuracy run); "
                 "the schedule stays the one planned for --epochs")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--clip-grad-norm", o.clip_grad_norm,
                 "clip the gradients to this global L2 norm before every step (clip_grad_norm_)")
      ->check(CLI::PositiveNumber);
  app.add_option("--freeze", o.freeze,
                 "keep layers fixed while the rest trains (fine-tuning): below:N for layers 0..N-1, or "
                 "comma-separated state_dict prefixes such as 0,1,3 (frozen layers run in eval mode)");
  app.add_option("--ema", o.ema,
                 "keep an exponential moving average of the weights with this decay (torch's AveragedModel with "
                 "get_ema_multi_avg_fn, BatchNorm statistics included); the test accuracy is the average's")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--ema-every", o.ema_every, "update the average after every N-th optimiser step")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("--lookahead", o.lookahead_k,
                 "wrap SGD or Adam in Lookahead: every K-th step the slow weights move --lookahead-alpha toward the "
                 "fast ones, which restart from them (Zhang et al. 2019)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("--lookahead-alpha", o.lookahead_alpha, "Lookahead's step toward the fast weights")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--tta", o.tta,
                 "test-time augmentation of the evaluation: none, or flip (the scores of each image and its mirror "
                 "averaged)")
      ->check(CLI::IsMember({"none", "flip"}))
      ->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "directory with train-/t10k- images and labels in IDX format (.gz or raw)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of initialisation, dropout and shuffling")->capture_default_str();
  app.add_option("--threads", o.threads,
                 "CPU threads (default: every core this process may use, as nproc counts them; with --parallel "
                 "threads: per replica, default the cores divided among the replicas)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--metrics", o.metrics, "append one JSON object per epoch to FILE");
  app.add_option("--save", o.save, "write a checkpoint (weights, optimiser, position) to FILE at the end");
  app.add_option("--init-from", o.init_from, "start from the weights in FILE (safetensors; PyTorch state_dict names)");
  app.add_option("--resume", o.resume, "continue exactly where the checkpoint FILE stopped");
  app.add_option("--export-onnx", o.export_onnx,
                 "write the trained network to FILE as an ONNX model (eval mode: ONNX Runtime, TensorRT, ...)");
  app.add_option("--max-steps", o.max_steps, "stop after this many optimiser steps in all (0: no limit)");
  app.add_flag("--no-shuffle", o.no_shuffle, "visit the training set in file order");
  app.add_flag("--no-prefetch", o.no_prefetch,
               "gather (and augment) each batch on the training threads instead of a background thread");
  app.add_option("--repeat", o.repeat, "repeat the training set this many times per epoch (seed 003's 1x/4x/8x)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--log-interval", o.log_interval, "print a progress line every N steps (0: never)");
  app.add_option("--eval-batch-size", o.eval_batch_size, "batch size for the test set")->check(CLI::Range(1, 1 << 20));
  app.add_option("--parallel", o.parallel,
                 "single (one device), threads (ThreadedReplicas: replicas split each batch) or ddp "
                 "(ProcessGroupDDP over MPI: start with mpirun -np N; --batch-size is per rank)")
      ->check(CLI::IsMember({"single", "threads", "ddp"}))
      ->capture_default_str();
  app.add_option("--replicas", o.replicas, "replicas for --parallel threads (each with --threads threads)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_flag("--deterministic", o.deterministic,
               "bitwise the same weights for any replica count / world size dividing --chunks");
  app.add_option("--chunks", o.chunks, "micro-batches per global batch in --deterministic mode")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--bucket-kib", o.bucket_kib, "gradient bucket size for --parallel ddp")
      ->check(CLI::Range(1, 1 << 22))
      ->capture_default_str();
  app.add_option("--compress", o.compress,
                 "--parallel ddp: send gradient buckets as bf16 or fp16, half the bytes (PyTorch's compression hooks)")
      ->check(CLI::IsMember({"none", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_flag("--error-feedback", o.error_feedback,
               "with --compress: carry each rank's rounding error into its next gradient");
  app.add_option("--timeout", o.timeout, "seconds before a stalled collective fails (--parallel ddp)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--accumulation", o.accumulation, "batches per optimiser step (gradient accumulation)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--precision", o.precision,
                 "fp32; fp16 (fp32 master weights, dynamic loss scaling) or bf16 (fp32 master weights)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option(
      "--lr-schedule", o.lr_schedule,
      "learning-rate schedule, torch's values: step,step_size=N,gamma=G | multistep,milestones=A/B,gamma=G | "
      "constant,factor=F,total_iters=N | cosine,warmup=N,start_factor=F,t_max=N,eta_min=E | "
      "onecycle,max_lr=L,total_steps=N[,pct_start=P,anneal=cos|linear,div_factor=D,final_div_factor=F,"
      "three_phase=0|1,cycle_momentum=0|1,base_momentum=M,max_momentum=M] (OneCycle cycles the momentum by default, "
      "as torch's)");
  app.add_flag("--schedule-per-step", o.schedule_per_step,
               "advance the schedule every optimiser step (OneCycle's use), not every epoch");
  app.add_option("--augment", o.augment,
                 "training augmentation, seeded by (seed, epoch, sample): crop=P (RandomCrop with P pixels of "
                 "zero padding), flip or flip=P (RandomHorizontalFlip), comma-separated");
  app.add_option("--label-smoothing", o.label_smoothing,
                 "CrossEntropyLoss label smoothing in [0, 1], torch's (models B, C, D, resnet, fast)");
  app.add_option("--class-weights", o.class_weights,
                 "CrossEntropyLoss class weights, one per class: w0,w1,...,w9 (torch's weight=)");
  CLI11_PARSE(app, argc, argv);
  try {
    // Bad loss options fail before the data is read, with the loss's message.
    const cohort::CrossEntropyOptions loss{.label_smoothing = o.label_smoothing,
                                           .class_weights = cohort::parse_class_weights(o.class_weights)};
    cohort::detail::check_cross_entropy_options("CrossEntropyLoss", loss);
    cohort::detail::check_class_weight_count("CrossEntropyLoss", loss, 10);
    (void)cohort::LrSchedule::parse(o.lr_schedule); // a bad spec fails before the data is read
    (void)cohort::parse_augmentation(o.augment, 28);
    if ((o.compress != "none" || o.error_feedback) && o.parallel != "ddp")
      throw cohort::ValueError("--compress and --error-feedback compress what ranks send each other: they need "
                               "--parallel ddp (found --parallel " +
                               o.parallel + ")");
    // A setting of a feature that is off would be silently ignored: refused instead.
    if (app.count("--lookahead-alpha") && o.lookahead_k == 0)
      throw cohort::ValueError("--lookahead-alpha is Lookahead's step: it needs --lookahead K");
    if (app.count("--ema-every") && o.ema == 0)
      throw cohort::ValueError("--ema-every is the weight average's interval: it needs --ema DECAY");
    if (o.error_feedback && o.compress == "none")
      throw cohort::ValueError("--error-feedback carries compression's rounding error: it needs --compress bf16|fp16");
    std::string model = o.model;
    for (char& c : model) c = char(std::tolower(static_cast<unsigned char>(c)));
#define TRAIN_MNIST_DISPATCH(m, p)                                                                                     \
  if (model == #m && o.precision == #p) return train_model_##m##_##p(o);
    TRAIN_MNIST_FOR_EACH(TRAIN_MNIST_DISPATCH)
#undef TRAIN_MNIST_DISPATCH
    std::fprintf(stderr, "train_mnist: no model %s with precision %s\n", o.model.c_str(), o.precision.c_str());
    return 2;
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "train_mnist: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mnist: unexpected error: %s\n", e.what());
    return 2;
  }
}
