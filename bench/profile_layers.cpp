// Where a training step's time goes, layer by layer, for one seed model, ResNet-20, FastResNet or
// MobileNetV2-small:
//
//   profile_layers --model A --batch 128 --threads 1
//
// Prints a table (forward and backward milliseconds per step for each layer, the optimiser step,
// and the loss). Conv2d and Linear rows also show GFLOP/s counted as
// bench/flops.hpp counts them (the direct algorithm's multiply-adds, whatever algorithm ran: a
// Winograd layer can pass 100%), and, with --peak (fma_peak's GFLOP/s for the same thread
// count), the share of that peak.

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <cohort/cohort.hpp>
#include <cohort/models/fast_resnet.hpp>
#include <cohort/models/mobilenet_v2.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>

#include "bench_common.hpp"
#include "flops.hpp"

using namespace cohort;

namespace {
/// Precision: FullPrecision (a Network, the loss and the optimiser timed apart) or
/// MixedPrecision<bf16> (the Trainer's single-device engine: bf16 layers, float master weights;
/// the loss and the optimiser step fall in "other").
template <class Model, class Loss, class Opt, class Precision = FullPrecision>
void profile(const std::string& name, Opt opt, std::size_t batch, std::size_t steps, double peak) {
  constexpr bool full = std::is_same_v<Precision, FullPrecision>;
  // Only what this precision measures is built (model D's engine holds its 4M parameters thrice).
  auto runner = [&] {
    if constexpr (full)
      return Network<Model>(0);
    else
      return detail::TrainEngine<SingleDevice<Cpu>, Precision, Model, Opt>(opt, EngineOptions{});
  }();
  std::uint64_t passes = 0;
  Loss loss;
  std::mt19937 gen(0);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(batch * Model::input_shape::size);
  for (auto& v : x) v = u(gen);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = std::int32_t(i % 10);
  const ConstBatchView<typename Model::input_shape, float> in(x.data(), batch);
  LayerProfile prof;
  double t_loss = 0, t_opt = 0;
  using clock = std::chrono::steady_clock;
  auto step = [&] {
    if constexpr (!full) {
      runner.step(in, labels, MicroStep{.step = passes, .forward_pass = passes});
      ++passes;
      return;
    } else {
      auto y = runner.forward(in);
      auto t0 = clock::now();
      loss.forward(y, labels);
      t_loss += std::chrono::duration<double>(clock::now() - t0).count();
      runner.backward(loss.backward());
      t0 = clock::now();
      opt.step(runner);
      t_opt += std::chrono::duration<double>(clock::now() - t0).count();
    }
  };
  for (int i = 0; i < 3; ++i) step();
  if constexpr (full)
    runner.executor().set_profile(&prof);
  else
    runner.replica().executor().set_profile(&prof);
  t_loss = t_opt = 0;
  const auto start = clock::now();
  for (std::size_t i = 0; i < steps; ++i) step();
  const double total = std::chrono::duration<double>(clock::now() - start).count() / double(steps) * 1e3;
  const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (n.push_back(std::string(detail::at_t<I, typename Model::layers>::layer::signature())), ...);
    }
    (std::make_index_sequence<Model::layer_count>{});
    return n;
  }();
  std::printf("model %s (%s), batch %zu, %zu thread(s): %.2f ms per training step (%.0f samples/s)\n", name.c_str(),
              full ? "fp32" : "MixedPrecision<bf16>", batch, num_threads(), total, double(batch) / total * 1e3);
  // Forward operations per sample of each layer (0 for layers without weights).
  const std::vector<double> flops = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::vector<double>{double(bench::detail::forward_flops<detail::at_t<I, typename Model::layers>>())...};
  }
  (std::make_index_sequence<Model::layer_count>{});
  std::printf("%-28s %10s %10s %7s %9s %9s %7s\n", "layer", "fwd ms", "bwd ms", "share", "fwd GF/s", "bwd GF/s",
              peak > 0 ? "% peak" : "");
  double accounted = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double f = prof.forward[i] / double(steps) * 1e3, b = prof.backward[i] / double(steps) * 1e3;
    accounted += f + b;
    std::printf("%2zu %-25s %10.3f %10.3f %6.1f%%", i, names[i].c_str(), f, b, 100 * (f + b) / total);
    if (flops[i] > 0) {
      // Backward: dW, plus dX for every layer but the first (the executor skips its dX).
      const double fwd = flops[i] * double(batch), bwd = fwd * (i == 0 ? 1 : 2);
      const double gf = fwd / f * 1e-6, gb = bwd / b * 1e-6, all = (fwd + bwd) / (f + b) * 1e-6;
      std::printf(" %9.1f %9.1f", gf, gb);
      if (peak > 0) std::printf(" %6.1f%%", 100 * all / peak);
    }
    std::printf("\n");
  }
  const double l = t_loss / double(steps) * 1e3, o = t_opt / double(steps) * 1e3;
  std::printf("%-28s %10.3f %10s %6.1f%%\n", "loss", l, "", 100 * l / total);
  std::printf("%-28s %10.3f %10s %6.1f%%\n", "optimizer step", o, "", 100 * o / total);
  std::printf("%-28s %10.3f %10s %6.1f%%\n", "other", total - accounted - l - o, "",
              100 * (total - accounted - l - o) / total);
}
} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("profile_layers");
  std::string model = "A";
  std::size_t batch = 128, threads = 1, steps = 10;
  double peak = 0;
  CLI::App app{"per-layer time of a training step"};
  app.add_option("--model", model)->check(CLI::IsMember({"A", "B", "C", "D", "resnet", "fast", "mobilenet"}));
  app.add_option("--batch", batch)->check(CLI::Range(1, 65536));
  app.add_option("--threads", threads)->check(CLI::Range(1, 256));
  app.add_option("--steps", steps)->check(CLI::PositiveNumber);
  app.add_option("--peak", peak, "fma_peak's GFLOP/s for this thread count: adds a % of peak column");
  std::string precision = "fp32";
  app.add_option("--precision", precision, "fp32, or bf16 (MixedPrecision<bf16>, on cohort's bf16 dot-product engine)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);
  using namespace cohort::models;
  if (precision == "bf16") {
    std::printf("bf16 dot-product engine: %s\n", cpu::bf16_dot_name(cpu::bf16_dot_engine()));
    if (model == "A")
      profile<ModelA, NllLoss<>, Adadelta<>, MixedPrecision<bf16>>("A", Adadelta({.lr = 0.5}), batch, steps, peak);
    else if (model == "B")
      profile<ModelB, CrossEntropyLoss<>, Sgd<>, MixedPrecision<bf16>>("B", Sgd({.lr = 0.01, .momentum = 0.9}), batch,
                                                                       steps, peak);
    else if (model == "C")
      profile<ModelC, CrossEntropyLoss<>, Adam<>, MixedPrecision<bf16>>("C", Adam({.lr = 1e-3, .eps = 1e-7}), batch,
                                                                        steps, peak);
    else if (model == "D")
      profile<ModelD, CrossEntropyLoss<>, Adam<>, MixedPrecision<bf16>>("D", Adam({.lr = 1e-3, .eps = 1e-7}), batch,
                                                                        steps, peak);
    else if (model == "resnet")
      profile<ResNet20, CrossEntropyLoss<>, Sgd<>, MixedPrecision<bf16>>(
          "resnet", Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4}), batch, steps, peak);
    else if (model == "mobilenet")
      profile<models::MobileNetV2Small<>, CrossEntropyLoss<>, Sgd<>, MixedPrecision<bf16>>(
          "mobilenet", Sgd({.lr = 0.05, .momentum = 0.9}), batch, steps, peak);
    else {
      // FastResNet's bf16 step is timed whole by bench/time_to_accuracy.py; one more engine here
      // would add to this program's compile for a network no bf16 target names.
      std::fprintf(stderr, "profile_layers: --precision bf16 profiles models A-D, resnet and mobilenet, not '%s'\n",
                   model.c_str());
      return 2;
    }
    return 0;
  }
  if (model == "A") profile<ModelA, NllLoss<>>("A", Adadelta({.lr = 0.5}), batch, steps, peak);
  if (model == "B") profile<ModelB, CrossEntropyLoss<>>("B", Sgd({.lr = 0.01, .momentum = 0.9}), batch, steps, peak);
  if (model == "C") profile<ModelC, CrossEntropyLoss<>>("C", Adam({.lr = 1e-3, .eps = 1e-7}), batch, steps, peak);
  if (model == "D") profile<ModelD, CrossEntropyLoss<>>("D", Adam({.lr = 1e-3, .eps = 1e-7}), batch, steps, peak);
  // ResNet-20: a residual block is one row (its branches inside).
  if (model == "resnet")
    profile<ResNet20, CrossEntropyLoss<>>("resnet", Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4}), batch,
                                          steps, peak);
  // FastResNet, the time-to-accuracy record network (bench/time_to_accuracy.py's recipe's optimiser).
  if (model == "fast")
    profile<FastResNet, CrossEntropyLoss<>>(
        "fast", Sgd({.lr = 0.2, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}), batch, steps, peak);
  // MobileNetV2-small (issue 37): an inverted residual with its shortcut is one row.
  if (model == "mobilenet")
    profile<models::MobileNetV2Small<>, CrossEntropyLoss<>>("mobilenet", Sgd({.lr = 0.05, .momentum = 0.9}), batch,
                                                            steps, peak);
}
