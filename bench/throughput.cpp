// Training or inference throughput of one seed model, one configuration per process, so that
// bench/compare_torch.py can alternate cohort and PyTorch runs on a quiet machine.
//
//   cohort_throughput --model A --batch 128 --mode train --iters 30
//
// Prints one JSON object: samples/s (median over `--repeats` timed windows), GFLOP/s and peak
// resident memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "bench_common.hpp"

using namespace cohort;

namespace {

struct Config {
  std::string model = "A", mode = "train";
  std::size_t batch = 128, iters = 20, warmup = 3, repeats = 3, threads = 1;
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
  auto step = [&] {
    auto y = net.forward(batch);
    if (train) {
      loss.forward(y, labels);
      net.backward(loss.backward());
      opt.step(net);
    }
  };
  for (std::size_t i = 0; i < c.warmup; ++i) step();
  std::vector<double> rates;
  for (std::size_t r = 0; r < c.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < c.iters; ++i) step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(double(c.iters * c.batch) / s);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("{\"framework\": \"cohort\", \"model\": \"%s\", \"mode\": \"%s\", \"batch\": %zu, \"threads\": %zu, "
              "\"samples_per_s\": %.1f, \"peak_rss_mib\": %.1f}\n",
              c.model.c_str(), c.mode.c_str(), c.batch, c.threads, rates[rates.size() / 2], bench::peak_rss_mib());
}

} // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"cohort training/inference throughput"};
  app.add_option("--model", c.model, "A, B, C or D")->check(CLI::IsMember({"A", "B", "C", "D"}));
  app.add_option("--mode", c.mode, "train or infer")->check(CLI::IsMember({"train", "infer"}));
  app.add_option("--batch", c.batch, "batch size")->check(CLI::Range(1, 65536));
  app.add_option("--iters", c.iters, "steps per timed window")->check(CLI::PositiveNumber);
  app.add_option("--warmup", c.warmup, "untimed steps first");
  app.add_option("--repeats", c.repeats, "timed windows (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--threads", c.threads, "intra-op threads")->check(CLI::Range(1, 1));
  CLI11_PARSE(app, argc, argv);
  using namespace cohort::models;
  if (c.model == "A") run<ModelA, NllLoss<>>(c, Adadelta({.lr = 0.5}));
  if (c.model == "B") run<ModelB, CrossEntropyLoss<>>(c, Sgd({.lr = 0.01, .momentum = 0.9}));
  if (c.model == "C") run<ModelC, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
  if (c.model == "D") run<ModelD, CrossEntropyLoss<>>(c, Adam({.lr = 1e-3, .eps = 1e-7}));
}
