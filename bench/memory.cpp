// Peak memory of training and evaluation (issue 35): the 3x32x32 ResNet-20 (models::CifarResNet20)
// trained --steps steps at --batch, then evaluated on the 10,000 test images at --eval-batch, on
// Fashion-MNIST made 3x32x32 (zero padding of 2, the grey channel three times: real pixels in the
// CIFAR shape; no CIFAR here). bench/memory.py runs it against bench/torch_memory.py, which does
// the same in PyTorch.
//
//   cohort_memory --steps 100 --batch 128 --eval-batch 1000 --threads 2
//
// Prints one JSON line: peak resident memory (VmHWM) after loading the data, after training and
// after evaluation, the network's activation bytes per sample as it states them, test accuracy.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <cohort/cohort.hpp>
#include <cohort/data/idx.hpp>
#include <cohort/models/resnet.hpp>

#include "bench_common.hpp"

using namespace cohort;

namespace {
using Net = models::CifarResNet20;

/// The first n images of an IDX file, normalised, padded to 32x32 and repeated over 3 channels.
std::vector<float> cifar_shaped(const IdxArray& images, std::size_t n, const Normalization& norm) {
  const auto table = norm.table();
  std::vector<float> out(n * 3 * 32 * 32, table[0]);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t y = 0; y < 28; ++y)
        for (std::size_t x = 0; x < 28; ++x)
          out[((i * 3 + c) * 32 + y + 2) * 32 + x + 2] = table[images.values[(i * 28 + y) * 28 + x]];
  return out;
}
std::vector<std::int32_t> first_labels(const IdxArray& labels, std::size_t n) {
  return {labels.values.begin(), labels.values.begin() + std::ptrdiff_t(n)};
}
} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("cohort_memory");
  std::size_t steps = 100, batch = 128, eval_batch = 1000, threads = 2;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  CLI::App app{"peak memory of training and evaluating the 3x32x32 ResNet-20 (one JSON line)"};
  app.add_option("--steps", steps, "training steps")->capture_default_str();
  app.add_option("--batch", batch, "training batch")->capture_default_str();
  app.add_option("--eval-batch", eval_batch, "evaluation batch (TrainerOptions::eval_batch_size)")
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Fashion-MNIST IDX files")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const IdxFiles train_files = find_idx_files(data_dir, Split::train),
                 test_files = find_idx_files(data_dir, Split::test);
  const IdxArray train_images = read_idx(train_files.images, idx_images_magic);
  const Normalization norm = Normalization::of(train_images);
  const std::size_t n_train = steps * batch, n_test = 10000;
  const auto train_x = cifar_shaped(train_images, n_train, norm);
  const auto train_y = first_labels(read_idx(train_files.labels, idx_labels_magic), n_train);
  const auto test_x = cifar_shaped(read_idx(test_files.images, idx_images_magic), n_test, norm);
  const auto test_y = first_labels(read_idx(test_files.labels, idx_labels_magic), n_test);
  const ImageView<Net::input_shape> train(train_x, train_y, 10), test(test_x, test_y, 10);
  const double after_data = bench::peak_rss_mib();

  Trainer<Net, Sgd<>> t(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4}),
                        {.batch_size = batch, .eval_batch_size = eval_batch, .threads = threads, .log = nullptr});
  const auto t0 = std::chrono::steady_clock::now();
  t.fit(train, 1);
  const auto t1 = std::chrono::steady_clock::now();
  const double after_train = bench::peak_rss_mib();
  const EvalReport e = t.evaluate(test);
  const auto t2 = std::chrono::steady_clock::now();
  const double after_eval = bench::peak_rss_mib();
  std::printf("{\"bench\": \"memory\", \"framework\": \"cohort\", \"model\": \"CifarResNet20\", \"steps\": %zu, "
              "\"batch\": %zu, \"eval_batch\": %zu, \"threads\": %zu, \"data_mib\": %.1f, \"peak_after_train_mib\": "
              "%.1f, \"peak_mib\": %.1f, \"activation_bytes_per_sample\": %zu, \"train_s\": %.2f, \"eval_s\": %.2f, "
              "\"test_accuracy\": %.2f}\n",
              steps, batch, eval_batch, threads, after_data, after_train, after_eval, Network<Net>::activation_bytes(1),
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              e.accuracy);
}
