// Training or inference throughput of one seed model, one configuration per process, so that
// bench/compare_torch.py can alternate cohort and PyTorch runs on a quiet machine and read each
// side's own peak resident memory.
//
//   cohort_throughput --model A --mode train --batch 128 --threads 1 --iters 20 --repeats 3
//   cohort_throughput --model C --mode infer --batch 1000 --threads 2
//   cohort_throughput --model A --mode train --batch 256 --replicas 2 --threads 1   # ThreadedReplicas
//
// Training: forward + loss + backward + the seed's optimiser step (A Adadelta, B SGD momentum,
// C/D Adam), train mode. Inference: eval mode, forward only. Inputs are synthetic (uniform in
// [0, 1)); the time does not depend on the pixel values.
//
// Protocol: `--warmup` untimed steps, then `--repeats` timed windows of `--iters` steps each; the
// reported rate is the median window's. Prints one JSON line (bench/compare_torch.py reads the
// last line): samples/s, every window's rate, FLOPs per sample (bench/flops.hpp), achieved
// GFLOP/s and peak resident memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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
};

template <class Model, class Loss, class Opt>
void run(const Config& c, Opt opt) {
  Network<Model> net(0);
  Loss loss;
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(c.batch * Model::input_shape::size);
  for (auto& v : x) v = u(gen);
  std::vector<std::int32_t> labels(c.batch);
  for (std::size_t i = 0; i < c.batch; ++i) labels[i] = std::int32_t(i % 10);
  const bool train = c.mode == "train";
  if (!train) net.eval();
  const ConstBatchView<typename Model::input_shape, float> batch(x.data(), c.batch);
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
  std::printf("{\"framework\": \"cohort\", \"replicas\": %zu, \"deterministic\": %s, \"model\": \"%s\", \"mode\": "
              "\"%s\", \"batch\": %zu, \"threads\": %zu, "
              "\"warmup\": %zu, \"iters\": %zu, \"repeats\": %zu, \"samples_per_s\": %.1f, \"window_samples_per_s\": "
              "[%s], \"ms_per_step\": %.3f, \"flops_per_sample\": %zu, \"gflops\": %.2f, \"peak_rss_mib\": %.1f}\n",
              c.replicas, c.deterministic ? "true" : "false", c.model.c_str(), c.mode.c_str(), c.batch,
              c.replicas ? c.threads : num_threads(), c.warmup, c.iters, c.repeats, median, windows.c_str(),
              1e3 * double(c.batch) / median, flops, median * double(flops) / 1e9, bench::peak_rss_mib());
}

} // namespace

int main(int argc, char** argv) {
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
  CLI11_PARSE(app, argc, argv);
  set_num_threads(c.replicas ? 1 : c.threads);
  using namespace cohort::models;
  if (c.model == "A") run<ModelA, NllLoss<>>(c, Adadelta({.lr = 0.5}));
  if (c.model == "B") run<ModelB, CrossEntropyLoss<>>(c, Sgd({.lr = 0.01, .momentum = 0.9}));
  if (c.model == "C") run<ModelC, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
  if (c.model == "D") run<ModelD, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
}
