#pragma once
/// \file
/// How a Trainer sets itself up from its options, before the first step: the options checked,
/// the optimiser configured (parameter groups, clipping, a schedule's first momentum), the CPU
/// pool sized, and the engine's options with the settings every rank must share.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/backend/cpu.hpp"
#include "cohort/backend/cpu/available_cores.hpp"
#include "cohort/core/error.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/optim/parameter_groups.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/error_feedback_state.hpp"
#include "cohort/train/trainer_options.hpp"

namespace cohort::detail {

inline std::string class_list_string(std::span<const std::string> names) { return "[" + quoted_list(names) + "]"; }

/// The class list of a dataset that names its classes (ImageFolder) against the one the model
/// was trained on: recorded in `state` (and `names`) by the first fit, checked afterwards and
/// after a resume (the checkpoint records it). A folder with other classes, or the same ones in
/// another order, would give every label another meaning: ValueError naming both lists.
template <class D>
void check_class_list(const D& d, TrainerState& state, std::vector<std::string>& names, const char* who) {
  if constexpr (requires { d.class_names(); }) {
    const auto& given = d.class_names();
    std::vector<std::string> found(given.begin(), given.end());
    const std::uint64_t fingerprint = class_list_fingerprint(found);
    if (state.class_count == 0) {
      state.class_count = found.size();
      state.class_fingerprint = fingerprint;
      names = std::move(found);
      return;
    }
    if (state.class_count != found.size() || state.class_fingerprint != fingerprint)
      throw ValueError(
          concat(who, ": the dataset's classes are ", class_list_string(found), "; the model was trained on ",
                 names.empty() ? concat(state.class_count, " classes in another list") : class_list_string(names),
                 " (a checkpoint records its class list): every label would name another class"));
  }
}

/// The optimiser's rate at construction, the base of o.lr_schedule (0 when none is set).
template <class Opt>
double schedulable_lr(const Opt& opt, const TrainerOptions& o) {
  if (o.lr_schedule.empty()) return 0.0;
  if constexpr (requires(Opt & x) {
                  x.set_lr(1.0);
                  { x.lr() } -> std::convertible_to<double>;
                })
    return double(opt.lr());
  else
    throw ValueError("Trainer: a learning-rate schedule needs an optimiser with set_lr() and lr() (Sgd, Adam, "
                     "Adadelta, OptimizerVariant)");
}
/// `opt` with the options' parameter groups and gradient clipping (engines copy them to every
/// replica and device).
template <class Net, class Opt>
Opt configured(Opt opt, const TrainerOptions& o) {
  if constexpr (requires(Opt & x) {
                  x.set_parameter_groups(std::vector<ParameterGroup>{});
                  x.set_max_grad_norm(1.0);
                }) {
    if (o.parameter_groups) opt.set_parameter_groups(parameter_groups<Net>(o.parameter_groups));
    if (o.max_grad_norm != 0) opt.set_max_grad_norm(o.max_grad_norm);
  } else if (o.parameter_groups || o.max_grad_norm != 0) {
    throw ValueError("Trainer: parameter_groups and max_grad_norm need an optimiser with set_parameter_groups() and "
                     "set_max_grad_norm() (cohort's optimisers derive them from detail::OptimizerBase)");
  }
  if constexpr (requires(Opt & x) { x.set_frozen(std::vector<ParameterRange>{}); }) {
    if (!o.freeze.empty()) opt.set_frozen(frozen_parameter_ranges<Net>(frozen_layers<Net>(o.freeze)));
  } else if (!o.freeze.empty()) {
    throw ValueError("Trainer: freeze needs an optimiser with set_frozen() (cohort's optimisers derive it from "
                     "detail::OptimizerBase)");
  }
  // A schedule that cycles the momentum sets it now, as torch's OneCycleLR does when built:
  // an optimiser without one fails here, before any data is read.
  if (const auto m = o.lr_schedule.momentum(0)) {
    if constexpr (requires(Opt & x) { x.set_momentum(0.9); })
      opt.set_momentum(*m);
    else
      throw ValueError(concat("Trainer: the learning-rate schedule cycles the momentum, and ", optimizer_name(opt),
                              " has none (torch's OneCycleLR refuses it too): add cycle_momentum=0"));
  }
  return opt;
}

/// Sizes the process's CPU pool from o.threads (the policies that train on it).
template <class Parallel>
CoreBudget use_threads(const TrainerOptions& o) {
  if constexpr (!host_memory_backend<typename Parallel::backend>) {
    return {num_threads(), "a device policy: the CPU pool is left as it was"};
  } else if constexpr (Parallel::name == std::string_view("ThreadedReplicas")) {
    return {o.parallel.threads_per_replica, "per replica (parallel.threads_per_replica)"};
  } else {
    const CoreBudget b = o.threads ? CoreBudget{o.threads, "TrainerOptions::threads"} : available_cores();
    set_num_threads(b.threads);
    return b;
  }
}
template <class Parallel>
TrainerOptions&& checked(TrainerOptions& o) {
  if (o.batch_size == 0) throw ValueError("Trainer: batch_size must be at least 1");
  // ThreadedReplicas on the CPU: the process's threads shared among the replicas unless given.
  if constexpr (Parallel::name == std::string_view("ThreadedReplicas") &&
                host_memory_backend<typename Parallel::backend>) {
    if (o.parallel.threads_per_replica == 0) {
      const std::size_t cores = o.threads ? o.threads : available_cores().threads;
      const std::size_t n = Parallel::replicas == dynamic_replicas ? o.parallel.replicas : Parallel::replicas;
      o.parallel.threads_per_replica = std::max<std::size_t>(1, cores / std::max<std::size_t>(n, 1));
    }
  }
  if (o.eval_batch_size == 0) throw ValueError("Trainer: eval_batch_size must be at least 1");
  if (o.test_time_augmentation != TestTimeAugmentation::none && !host_memory_backend<typename Parallel::backend>)
    throw ValueError(concat("Trainer: TrainerOptions::test_time_augmentation = ", to_string(o.test_time_augmentation),
                            " runs in the CPU replicas' evaluation, and ", Parallel::name,
                            " evaluates on a device: expected TestTimeAugmentation::none"));
  if (o.accumulation_steps == 0) throw ValueError("Trainer: accumulation_steps must be at least 1");
  if (o.target_accuracy && !(*o.target_accuracy > 0 && *o.target_accuracy <= 100))
    throw ValueError(concat("Trainer: target_accuracy ", *o.target_accuracy,
                            " is not a test accuracy in % (expected a value in (0, 100])"));
  // Only ProcessGroupDDP sends gradients anywhere: elsewhere the option would silently do nothing.
  if (Parallel::name != std::string_view("ProcessGroupDDP") &&
      (o.parallel.compression != GradientCompression::none || o.parallel.error_feedback))
    throw ValueError(concat("Trainer: parallel.compression = ", compression_name(o.parallel.compression),
                            o.parallel.error_feedback ? " with error_feedback" : "", " under ", Parallel::name,
                            ": gradient compression applies to ProcessGroupDDP only (", Parallel::name,
                            " sums gradients in memory)"));
  if (o.parallel.error_feedback && o.parallel.compression == GradientCompression::none)
    throw ValueError("Trainer: parallel.error_feedback carries the rounding of compressed gradients over; set "
                     "parallel.compression to bf16 or fp16, or error_feedback to false");
  return std::move(o);
}
/// ProcessGroupDDP's error-feedback residuals gathered at rank 0 for a checkpoint (empty for
/// engines without them), and a checkpoint's put back (train/error_feedback_state.hpp).
template <class Engine>
ErrorFeedbackState gathered_error_feedback(Engine& e) {
  if constexpr (requires { e.gather_error_feedback(); })
    return e.gather_error_feedback();
  else
    return {};
}
template <class Engine>
void restore_error_feedback(Engine& e, const ErrorFeedbackState& s) {
  if constexpr (requires { e.scatter_error_feedback(s); }) e.scatter_error_feedback(s);
}

/// What the engine is built with; the settings every rank must share.
template <class Net>
EngineOptions engine_options(const TrainerOptions& o) {
  EngineOptions e{.seed = o.seed,
                  .parallel = o.parallel,
                  .loss_scale = o.loss_scale,
                  .loss = o.loss,
                  .ignore_index = o.ignore_index,
                  .regression = o.regression,
                  .frozen = frozen_layers<Net>(o.freeze),
                  .eval_chunk = o.batch_size,
                  .tta = o.test_time_augmentation,
                  .agreement = {}};
  e.agreement = {
      concat("batch_size: ", o.batch_size),
      concat("accumulation_steps: ", o.accumulation_steps),
      concat("seed: ", o.seed),
      concat("shuffle: ", o.shuffle),
      concat("max_steps: ", o.max_steps),
      concat("target_accuracy: ", o.target_accuracy ? exact_text(*o.target_accuracy) : std::string("none")),
      concat("max_grad_norm: ", exact_text(o.max_grad_norm)),
      concat("parameter_groups: ", o.parameter_groups ? parameter_groups<Net>(o.parameter_groups).size() : 0),
      concat("label_smoothing: ", exact_text(o.loss.label_smoothing)),
      concat("class_weights: ", class_weights_text(o.loss.class_weights)),
      concat("ignore_index: ", o.ignore_index),
      concat("regression: ", regression_loss_name(o.regression.loss), ", beta ", exact_text(o.regression.beta),
             ", delta ", exact_text(o.regression.delta), ", pos_weight ", class_weights_text(o.regression.pos_weight)),
      concat("augment: ", o.augment.names()),
      concat("joint_augment: ", o.joint_augment.names()),
      concat("freeze: ", e.frozen.text()),
      concat("test_time_augmentation: ", to_string(o.test_time_augmentation))};
  return e;
}

} // namespace cohort::detail
