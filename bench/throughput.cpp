// Training or inference throughput of one seed model, one configuration per process, so that
// bench/compare_torch.py can alternate cohort and PyTorch runs on a quiet machine and read each
// side's own peak resident memory.
//
//   cohort_throughput --model A --mode train --batch 128 --threads 1 --iters 20 --repeats 3
//   cohort_throughput --model C --mode infer --batch 1000 --threads 2
//   cohort_throughput --model A --mode train --batch 256 --replicas 2 --threads 1   # ThreadedReplicas
//   cohort_throughput --model B --data synthetic                                 # one fixed random batch
//
// Training: forward + loss + backward + the seed's optimiser step (A Adadelta, B SGD momentum,
// C/D Adam), train mode. Inference: eval mode, forward only.
//
// Data (`--data`): `real` (the default) is Fashion-MNIST's training set (`--data-dir`), normalised,
// shuffled once with a fixed seed and cut into consecutive batches that rotate through all 60,000
// images: every step sees a batch it has not seen for an epoch, with real labels and real pixel
// statistics (mostly exact zeros). `synthetic` is the old regime: one batch of uniform [0, 1)
// values stepped again and again (its cache footprint and value distribution flatter kernels).
// bench/torch_throughput.py builds the same batches. `--flush-denormal` sets FTZ/DAZ (as
// torch.set_flush_denormal(True)); the default is IEEE subnormals on both sides.
//
// Protocol: `--warmup` untimed steps, then `--repeats` timed windows of `--iters` steps each; the
// reported rate is the median window's. Prints one JSON line (bench/compare_torch.py reads the
// last line): samples/s, every window's rate, FLOPs per sample (bench/flops.hpp), achieved
// GFLOP/s and peak resident memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <xmmintrin.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/train/trainer.hpp>

#include "bench_common.hpp"
#include "flops.hpp"

using namespace cohort;

// The FLOP counts bench/torch_throughput.py computes from the PyTorch models (same convention).
static_assert(bench::Flops<models::ModelA>::forward == 6'094'208 && bench::Flops<models::ModelA>::train == 18'087'936);
static_assert(bench::Flops<models::ModelB>::forward == 5'676'160 && bench::Flops<models::ModelB>::train == 16'401'280);
static_assert(bench::Flops<models::ModelC>::forward == 1'255'680 && bench::Flops<models::ModelC>::train == 3'315'456);
static_assert(bench::Flops<models::ModelD>::forward == 238'270'464 &&
              bench::Flops<models::ModelD>::train == 713'005'056);

namespace {

struct Config {
  std::string model = "A", mode = "train";
  std::size_t batch = 128, iters = 20, warmup = 3, repeats = 3, threads = 1;
  std::size_t replicas = 0; // > 0: ThreadedReplicas with `threads` threads each
  bool deterministic = false;
  std::string data = "real", data_dir = default_data_dir.string();
  bool flush_denormal = false;
};

/// The images and labels the timed steps cycle through: `count` batches laid end to end.
struct Batches {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  std::size_t count = 1;
};

/// Fashion-MNIST's training set, normalised and shuffled (std::mt19937_64 seed 0, Fisher-Yates
/// as bench/torch_throughput.py does it), as whole batches; or one synthetic batch.
template <class Shape>
Batches make_batches(const Config& c) {
  Batches b;
  if (c.data == "synthetic") {
    std::mt19937 gen(0);
    std::uniform_real_distribution<float> u(0, 1);
    b.x.resize(c.batch * Shape::size);
    for (auto& v : b.x) v = u(gen);
    b.y.resize(c.batch);
    for (std::size_t i = 0; i < c.batch; ++i) b.y[i] = std::int32_t(i % 10);
    return b;
  }
  const auto files = find_idx_files(c.data_dir, Split::train);
  const auto images = read_idx(files.images, idx_images_magic);
  const auto set =
      ImageDataset<Shape>::from_idx(images, read_idx(files.labels, idx_labels_magic), 10, Normalization::of(images));
  std::vector<std::size_t> order(set.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 gen(0);
  for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[gen() % (i + 1)]);
  b.count = set.size() / c.batch;
  b.x.resize(b.count * c.batch * Shape::size);
  b.y.resize(b.count * c.batch);
  for (std::size_t k = 0; k < b.count * c.batch; ++k) {
    std::copy(set.image(order[k]), set.image(order[k]) + Shape::size, b.x.data() + k * Shape::size);
    b.y[k] = set.label(order[k]);
  }
  return b;
}

template <class Model, class Loss, class Opt>
void run(const Config& c, Opt opt) {
  Network<Model> net(0);
  Loss loss;
  const Batches data = make_batches<typename Model::input_shape>(c);
  const bool train = c.mode == "train";
  if (!train) net.eval();
  // ThreadedReplicas: the trainer's engine, stepped directly (no data pipeline in the timing).
  std::unique_ptr<detail::TrainEngine<ThreadedReplicas<dynamic_replicas>, FullPrecision, Model, Opt>> replicas;
  if (c.replicas) {
    EngineOptions eo{.seed = 0};
    eo.parallel.replicas = c.replicas;
    eo.parallel.threads_per_replica = c.threads;
    eo.parallel.deterministic = c.deterministic;
    eo.parallel.deterministic_chunks = c.replicas * 2;
    replicas =
        std::make_unique<detail::TrainEngine<ThreadedReplicas<dynamic_replicas>, FullPrecision, Model, Opt>>(opt, eo);
  }
  std::uint64_t passes = 0;
  auto step = [&] {
    const std::size_t k = passes % data.count; // the next batch of the rotation
    const ConstBatchView<typename Model::input_shape, float> batch(
        data.x.data() + k * c.batch * Model::input_shape::size, c.batch);
    const std::span<const std::int32_t> labels(data.y.data() + k * c.batch, c.batch);
    if (replicas) {
      if (train)
        replicas->step(batch, labels, {.step = passes, .forward_pass = passes});
      else
        replicas->evaluate(batch, labels);
      ++passes;
      return;
    }
    auto y = net.forward(batch);
    if (train) {
      loss.forward(y, labels);
      net.backward(loss.backward());
      opt.step(net);
    }
    ++passes;
  };
  for (std::size_t i = 0; i < c.warmup; ++i) step();
  std::vector<double> rates; // samples/s of each timed window, in order
  for (std::size_t r = 0; r < c.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < c.iters; ++i) step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(double(c.iters * c.batch) / s);
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const std::size_t flops = bench::Flops<Model>::per_sample(train);
  std::string windows;
  for (const double r : rates) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.1f", windows.empty() ? "" : ", ", r);
    windows += buf;
  }
  // The convolution algorithm asked for (COHORT_CONV_ALGORITHM, see backend/cpu/conv2d_winograd.hpp).
  const char* algorithm = std::getenv("COHORT_CONV_ALGORITHM");
  std::printf("{\"framework\": \"cohort\", \"conv_algorithm\": \"%s\", \"data\": \"%s\", \"batches_in_rotation\": %zu, "
              "\"flush_denormal\": %s, \"replicas\": %zu, \"deterministic\": %s, \"model\": \"%s\", \"mode\": "
              "\"%s\", \"batch\": %zu, \"threads\": %zu, "
              "\"warmup\": %zu, \"iters\": %zu, \"repeats\": %zu, \"samples_per_s\": %.1f, \"window_samples_per_s\": "
              "[%s], \"ms_per_step\": %.3f, \"flops_per_sample\": %zu, \"gflops\": %.2f, \"peak_rss_mib\": %.1f}\n",
              algorithm ? algorithm : "auto", c.data.c_str(), data.count, c.flush_denormal ? "true" : "false",
              c.replicas, c.deterministic ? "true" : "false", c.model.c_str(), c.mode.c_str(), c.batch,
              c.replicas ? c.threads : num_threads(), c.warmup, c.iters, c.repeats, median, windows.c_str(),
              1e3 * double(c.batch) / median, flops, median * double(flops) / 1e9, bench::peak_rss_mib());
}

} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("cohort_throughput");
  Config c;
  CLI::App app{"cohort training/inference throughput of one seed model (one JSON line)"};
  app.add_option("--model", c.model, "A, B, C or D")->check(CLI::IsMember({"A", "B", "C", "D"}))->capture_default_str();
  app.add_option("--mode", c.mode, "train (forward, loss, backward, optimiser step) or infer (eval mode, forward)")
      ->check(CLI::IsMember({"train", "infer"}))
      ->capture_default_str();
  app.add_option("--batch", c.batch, "batch size")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--iters", c.iters, "steps per timed window")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", c.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--repeats", c.repeats, "timed windows (the median is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", c.threads, "intra-op threads (cohort::set_num_threads)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--replicas", c.replicas, "ThreadedReplicas: replicas, each with --threads threads (0: single device)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--deterministic", c.deterministic, "with --replicas: deterministic mode (2 chunks per replica)");
  app.add_option("--data", c.data, "real: Fashion-MNIST batches in shuffled order; synthetic: one random batch")
      ->check(CLI::IsMember({"real", "synthetic"}))
      ->capture_default_str();
  app.add_option("--data-dir", c.data_dir, "directory with Fashion-MNIST's IDX files")->capture_default_str();
  app.add_flag("--flush-denormal", c.flush_denormal, "flush subnormals to zero (FTZ and DAZ)");
  CLI11_PARSE(app, argc, argv);
  // Before any pool thread starts: threads inherit the creating thread's MXCSR.
  if (c.flush_denormal) _mm_setcsr(_mm_getcsr() | 0x8040);
  set_num_threads(c.replicas ? 1 : c.threads);
  using namespace cohort::models;
  if (c.model == "A") run<ModelA, NllLoss<>>(c, Adadelta({.lr = 0.5}));
  if (c.model == "B") run<ModelB, CrossEntropyLoss<>>(c, Sgd({.lr = 0.01, .momentum = 0.9}));
  if (c.model == "C") run<ModelC, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
  if (c.model == "D") run<ModelD, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
}
