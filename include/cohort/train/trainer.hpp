#pragma once
/// \file
/// The training loop of the seed notebooks, with the execution policy as a template argument.
///
///     using namespace cohort;
///     Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128});
///     auto history = trainer.fit(train_set, /*epochs=*/2, &test_set);
///     trainer.save("model_a.safetensors");
///
/// `Trainer<Net, Optimizer, Parallel = SingleDevice<>, Precision = FullPrecision>`: the policies
/// pick at compile time how a step is computed; the loop (sampling, batching, timing, logging,
/// metrics, checkpoints) is the same for all of them. The loss follows the network: NllLoss after
/// a final LogSoftmax (seed 000), CrossEntropyLoss on raw scores otherwise (seeds 001, 003).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu.hpp"
#include "cohort/core/error.hpp"
#include "cohort/data/sampler.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/loss/cross_entropy_loss.hpp"
#include "cohort/loss/nll_loss.hpp"
#include "cohort/network/network.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/parallel/single_device.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/tensor/buffer.hpp"
#include "cohort/train/checkpoint.hpp"

namespace cohort {

/// A labelled image set the trainer can draw batches from (data/dataset.hpp's ImageDataset,
/// repeated or not, or anything with the same three members).
template <class D, class InputShape>
concept ClassificationData = requires(const D& d, std::size_t i) {
  { d.size() } -> std::convertible_to<std::size_t>;
  { d.image(i) } -> std::convertible_to<const float*>;
  { d.label(i) } -> std::convertible_to<std::int32_t>;
};

/// The loss a network's output calls for.
template <class Net>
using default_loss_t = std::conditional_t<
    std::is_same_v<typename detail::at_t<Net::layer_count - 1, typename Net::layers>::layer, LogSoftmax>,
    NllLoss<float>, CrossEntropyLoss<float>>;

/// How the trainer runs, logs and records.
struct TrainerOptions {
  std::size_t batch_size = 128;
  std::size_t eval_batch_size = 1000;
  /// Seeds initialisation, dropout and shuffling.
  std::uint64_t seed = 0;
  bool shuffle = true;
  /// Stop after this many optimiser steps in all (0: no limit); the position is kept, so a
  /// checkpoint taken then resumes exactly.
  std::uint64_t max_steps = 0;
  /// A progress line every this many steps (0: none), as the seed notebooks print.
  std::size_t log_interval = 10;
  /// Where progress goes (nullptr: silent).
  std::ostream* log = &std::cout;
  /// Append one JSON object per epoch here (empty: no file).
  std::filesystem::path metrics{};
  /// Recorded in the metrics as seed 003 does.
  std::string model_size{};
  std::size_t n_dataset_repeat = 1;
};

/// What one epoch (or the part of it run before max_steps) produced.
struct EpochReport {
  std::uint64_t epoch = 0;
  bool complete = true;
  std::size_t steps = 0, samples = 0;
  double seconds = 0, samples_per_s = 0, train_loss = 0;
  std::optional<double> test_accuracy, test_loss;
};

/// Accuracy (percent) and mean loss over a dataset.
struct EvalReport {
  double accuracy = 0, loss = 0;
  std::size_t samples = 0;
};

namespace detail {

/// How one training step is computed under a (parallel, precision) policy pair. Each policy
/// issue adds its specialisation; an unsupported pair fails here, with a message.
template <class Parallel, class Precision, class Net, class Opt>
class TrainEngine {
  static_assert(dependent_false<Parallel>,
                "Trainer: this combination of parallel and precision policies is not available (see "
                "parallel/ and precision/ for what exists)");
};

/// SingleDevice<Cpu> + FullPrecision: one network, one optimiser.
template <class Net, class Opt>
class TrainEngine<SingleDevice<Cpu>, FullPrecision, Net, Opt> {
 public:
  using network_type = Network<Net, float, Cpu>;
  using loss_type = default_loss_t<Net>;

  TrainEngine(Opt opt, std::uint64_t seed) : net_(seed), opt_(std::move(opt)) {}

  double step(ConstBatchView<typename Net::input_shape, float> x, std::span<const std::int32_t> labels) {
    net_.train();
    const double l = loss_.forward(net_.forward(x), labels);
    net_.backward(loss_.backward());
    opt_.step(net_);
    return l;
  }
  /// Predictions for accuracy: returns (correct, summed loss) over the batch, in eval mode.
  std::pair<std::size_t, double> evaluate(ConstBatchView<typename Net::input_shape, float> x,
                                          std::span<const std::int32_t> labels) {
    net_.eval();
    const auto y = net_.forward(x);
    const double l = loss_.forward(y, labels);
    std::size_t correct = 0;
    constexpr std::size_t k = Net::output_shape::size;
    for (std::size_t n = 0; n < x.batch(); ++n) {
      const float* row = y.data() + n * k;
      correct += std::size_t(std::max_element(row, row + k) - row) == std::size_t(labels[n]);
    }
    net_.train();
    return {correct, l * double(x.batch())};
  }

  network_type& network() noexcept { return net_; }
  Opt& optimizer() noexcept { return opt_; }
  static constexpr std::size_t devices = 1;

 private:
  network_type net_;
  Opt opt_;
  loss_type loss_;
};

/// A JSON number, or null for what is not known (NaN) or not finite.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace detail

/// `Trainer<Net, Optimizer, Parallel = SingleDevice<>, Precision = FullPrecision>`.
template <class Net, class Opt, class Parallel = SingleDevice<>, class Precision = FullPrecision>
class Trainer {
  static_assert(NetworkDescription<Net>, "Trainer: Net must be a well-formed Sequential<Input<...>, Layers...>");
  static_assert(Optimizer<Opt>, "Trainer: Opt must be an optimiser (Sgd<>, Adam<>, Adadelta<>, ...)");
  static_assert(ParallelPolicy<Parallel>, "Trainer: Parallel must be a parallel policy (SingleDevice<>, ...)");
  static_assert(PrecisionPolicy<Precision>, "Trainer: Precision must be a precision policy (FullPrecision, ...)");
  static_assert(Net::output_shape::rank == 1, "Trainer: the network must end in a vector of class scores");

  using input_shape = typename Net::input_shape;
  using engine_type = detail::TrainEngine<Parallel, Precision, Net, Opt>;

 public:
  explicit Trainer(Opt opt, TrainerOptions options = {})
      : opt_(std::move(options)), engine_(std::move(opt), opt_.seed) {
    if (opt_.batch_size == 0) throw ValueError("Trainer: batch_size must be at least 1");
    if (opt_.eval_batch_size == 0) throw ValueError("Trainer: eval_batch_size must be at least 1");
  }

  auto& network() noexcept { return engine_.network(); }
  Opt& optimizer() noexcept { return engine_.optimizer(); }
  const TrainerOptions& options() const noexcept { return opt_; }
  /// Optimiser steps so far, epochs completed, and batches of the current epoch done.
  std::uint64_t step() const noexcept { return state_.step; }
  std::uint64_t epoch() const noexcept { return state_.epoch; }
  bool reached_max_steps() const noexcept { return opt_.max_steps && state_.step >= opt_.max_steps; }

  /// Trains until `epochs` epochs are complete (counting epochs done before a resume) or
  /// max_steps is reached; evaluates on `test` after each epoch if given.
  template <class Train, class Test = Train>
  requires ClassificationData<Train, input_shape> std::vector<EpochReport> fit(const Train& train, std::size_t epochs,
                                                                               const Test* test = nullptr) {
    std::vector<EpochReport> out;
    while (state_.epoch < epochs && !reached_max_steps()) out.push_back(fit_epoch(train, test));
    return out;
  }

  /// Trains (the rest of) the current epoch.
  template <class Train, class Test = Train>
  requires ClassificationData<Train, input_shape> EpochReport fit_epoch(const Train& train,
                                                                        const Test* test = nullptr) {
    const std::size_t n = train.size();
    if (n == 0) throw ValueError("Trainer: the training set is empty");
    const std::size_t bs = opt_.batch_size;
    const std::size_t batches = (n + bs - 1) / bs;
    if (state_.batch_in_epoch > 0 && state_.batch_size != bs)
      throw ValueError(detail::concat("Trainer: resuming in the middle of an epoch needs the checkpoint's batch size ",
                                      state_.batch_size, ", this run has ", bs));
    state_.batch_size = bs;
    state_.seed = opt_.seed;
    state_.shuffle = opt_.shuffle;
    ShuffleSampler sampler(n, opt_.seed, opt_.shuffle);
    sampler.indices(state_.epoch, order_);

    EpochReport r;
    r.epoch = state_.epoch;
    double loss_sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t b = state_.batch_in_epoch; b < batches; ++b) {
      if (reached_max_steps()) {
        r.complete = false;
        break;
      }
      const std::size_t first = b * bs, count = std::min(bs, n - first);
      gather(train, std::span<const std::size_t>(order_.data() + first, count));
      const double l = engine_.step({batch_x_.data(), count}, std::span<const std::int32_t>(batch_y_.data(), count));
      loss_sum += l;
      ++r.steps;
      r.samples += count;
      ++state_.step;
      state_.batch_in_epoch = b + 1;
      if (opt_.log && opt_.log_interval && b % opt_.log_interval == 0) {
        char line[160];
        std::snprintf(line, sizeof line, "epoch: %llu [%zu/%zu (%.0f%%)]\ttraining loss: %.6f\n",
                      static_cast<unsigned long long>(state_.epoch), b, batches, 100.0 * double(b) / double(batches),
                      l);
        *opt_.log << line << std::flush;
      }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.samples_per_s = r.seconds > 0 ? double(r.samples) / r.seconds : 0;
    r.train_loss = r.steps ? loss_sum / double(r.steps) : 0;
    if (r.complete && state_.batch_in_epoch == batches) {
      ++state_.epoch;
      state_.batch_in_epoch = 0;
    } else {
      r.complete = false;
    }
    if (test) {
      const EvalReport e = evaluate(*test);
      r.test_accuracy = e.accuracy;
      r.test_loss = e.loss;
    }
    record(r);
    return r;
  }

  /// Accuracy and mean loss on `data` in evaluation mode (dropout off, running statistics).
  template <class Data>
  requires ClassificationData<Data, input_shape> EvalReport evaluate(const Data& data) {
    EvalReport e;
    std::size_t correct = 0;
    double loss = 0;
    std::vector<std::size_t> idx;
    for (std::size_t first = 0; first < data.size(); first += opt_.eval_batch_size) {
      const std::size_t count = std::min(opt_.eval_batch_size, data.size() - first);
      idx.resize(count);
      for (std::size_t i = 0; i < count; ++i) idx[i] = first + i;
      gather(data, idx);
      const auto [c, l] =
          engine_.evaluate({batch_x_.data(), count}, std::span<const std::int32_t>(batch_y_.data(), count));
      correct += c;
      loss += l;
    }
    e.samples = data.size();
    e.accuracy = data.size() ? 100.0 * double(correct) / double(data.size()) : 0;
    e.loss = data.size() ? loss / double(data.size()) : 0;
    return e;
  }

  /// Saves weights, optimiser state and position (atomic; resumes bitwise).
  void save(const std::filesystem::path& path) {
    state_.forward_passes = network().step();
    save_checkpoint(path, network().parameters(), optimizer(), state_);
  }
  /// Continues from a checkpoint written by save(). Throws CheckpointError (changing nothing)
  /// if it does not fit this network and optimiser, ValueError if its seed differs.
  void resume(const std::filesystem::path& path) {
    auto& net = network();
    TrainerState s = load_checkpoint(path, net.parameters(), optimizer());
    net.set_step(s.forward_passes);
    net.set_seed(s.seed);
    opt_.seed = s.seed;
    opt_.shuffle = s.shuffle;
    state_ = s;
  }
  /// Starts from the weights of a file (a weights file, a checkpoint, or a PyTorch state_dict
  /// saved with safetensors); optimiser and position start fresh.
  void init_from(const std::filesystem::path& path) { load_weights(path, network().parameters()); }

  const TrainerState& state() const noexcept { return state_; }

 private:
  /// Copies the samples at `idx` into the batch buffers (no allocation once they are sized).
  template <class Data>
  void gather(const Data& data, std::span<const std::size_t> idx) {
    batch_x_.resize(std::max(batch_x_.size(), idx.size() * input_shape::size));
    batch_y_.resize(std::max(batch_y_.size(), idx.size()));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const float* src = data.image(idx[i]);
      std::copy(src, src + input_shape::size, batch_x_.data() + i * input_shape::size);
      batch_y_[i] = data.label(idx[i]);
    }
  }

  void record(const EpochReport& r) {
    if (r.complete) epoch_seconds_.push_back(r.seconds);
    if (opt_.log) {
      char line[200];
      std::snprintf(line, sizeof line, "epoch %llu%s: %.2f s, %.0f samples/s, mean training loss %.6f",
                    static_cast<unsigned long long>(r.epoch), r.complete ? "" : " (partial)", r.seconds,
                    r.samples_per_s, r.train_loss);
      *opt_.log << line;
      if (r.test_accuracy) {
        std::snprintf(line, sizeof line, ", test accuracy %.2f%%", *r.test_accuracy);
        *opt_.log << line;
      }
      *opt_.log << std::endl;
    }
    if (opt_.metrics.empty()) return;
    std::ofstream out(opt_.metrics, std::ios::app);
    if (!out) throw IoError(detail::concat(opt_.metrics.string(), ": cannot open the metrics file for appending"));
    constexpr double unknown = std::numeric_limits<double>::quiet_NaN();
    const double first = epoch_seconds_.size() > 0 ? epoch_seconds_[0] : unknown;
    const double second = epoch_seconds_.size() > 1 ? epoch_seconds_[1] : unknown;
    out << "{\"epoch\": " << r.epoch << ", \"complete\": " << (r.complete ? "true" : "false")
        << ", \"n_dataset_repeat\": " << opt_.n_dataset_repeat << ", \"batch_size\": " << opt_.batch_size
        << ", \"n_devices\": " << engine_type::devices << ", \"model_size\": " << detail::json_quote(opt_.model_size)
        << ", \"first epoch time\": " << detail::json_number(first)
        << ", \"second epoch time\": " << detail::json_number(second)
        << ", \"epoch time\": " << detail::json_number(r.seconds) << ", \"steps\": " << r.steps
        << ", \"train_loss\": " << detail::json_number(r.train_loss)
        << ", \"test_accuracy\": " << detail::json_number(r.test_accuracy.value_or(unknown))
        << ", \"samples_per_s\": " << detail::json_number(r.samples_per_s) << "}\n";
    if (!out) throw IoError(detail::concat(opt_.metrics.string(), ": writing the metrics failed"));
  }

  TrainerOptions opt_;
  engine_type engine_;
  TrainerState state_{};
  std::vector<std::size_t> order_;
  HostBuffer<float> batch_x_;
  HostBuffer<std::int32_t> batch_y_;
  std::vector<double> epoch_seconds_;
};

} // namespace cohort
