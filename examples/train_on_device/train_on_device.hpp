// Seed 000's model (ModelA, Adadelta lr 0.5, NLL loss) or seed 001's (ModelB: BatchNorm, SGD lr
// 1e-4, batch 100) trained on Fashion-MNIST with the device backend `Backend`: SingleDevice<Cuda>
// on a GPU (main_cuda.cu), or the very same kernels on the CPU's cores through Thrust's OpenMP
// system (main_omp.cpp, SingleDevice<ThrustDevice>).
//
//     train_on_device_cuda [--model A|B] [--data-dir DIR] [--epochs N] [--batch-size N] [--max-steps N]
//                          [--device I] [--precision fp32|fp16|bf16] [--metrics FILE]
//
// --metrics appends one JSON object per epoch (the Trainer's: epoch time, samples/s, accuracy):
// what scripts/gpu-check.sh reads.
//
// --precision fp16 is seed 004's Apex O2 (16-bit weights and activations, float master weights,
// dynamic loss scaling); bf16 needs no loss scaling.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

struct DeviceTrainOptions {
  std::string model = "A";
  std::string data_dir = cohort::default_data_dir.string();
  std::size_t epochs = 1, batch_size = 0, max_steps = 0; // batch 0: the seed's (A 128, B 100)
  int device = 0;
  std::string precision = "fp32";
  std::string metrics;
};

/// Parses the few flags above; exits with a message on anything else.
inline DeviceTrainOptions parse_device_train_options(int argc, char** argv) {
  DeviceTrainOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto number = [&](const char* flag) {
      if (!v) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], flag);
        std::exit(2);
      }
      ++i;
      return std::strtoull(v, nullptr, 10);
    };
    if (a == "--data-dir" && v) {
      o.data_dir = v;
      ++i;
    } else if (a == "--model" && v && (std::string_view(v) == "A" || std::string_view(v) == "B")) {
      o.model = v;
      ++i;
    } else if (a == "--metrics" && v) {
      o.metrics = v;
      ++i;
    } else if (a == "--epochs") {
      o.epochs = number("--epochs");
    } else if (a == "--batch-size") {
      o.batch_size = number("--batch-size");
    } else if (a == "--max-steps") {
      o.max_steps = number("--max-steps");
    } else if (a == "--device") {
      o.device = int(number("--device"));
    } else if (a == "--precision" && v &&
               (std::string_view(v) == "fp32" || std::string_view(v) == "fp16" || std::string_view(v) == "bf16")) {
      o.precision = v;
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--model A|B] [--data-dir DIR] [--epochs N] [--batch-size N] [--max-steps N] "
                   "[--device I] [--precision fp32|fp16|bf16] [--metrics FILE]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

template <class Backend, class Precision, class Net, class Opt>
int train_on_device_in(const DeviceTrainOptions& o, Opt opt, std::size_t seed_batch) {
  using namespace cohort;
  using Data = ImageDataset<typename Net::input_shape>;
  const IdxArray train_images = read_idx(find_idx_files(o.data_dir, Split::train).images, idx_images_magic);
  const Normalization norm = Normalization::of(train_images);
  const Data train_set = Data::from_idx(
      train_images, read_idx(find_idx_files(o.data_dir, Split::train).labels, idx_labels_magic), 10, norm);
  const Data test_set = Data::load(find_idx_files(o.data_dir, Split::test), 10, norm);
  TrainerOptions to;
  to.batch_size = o.batch_size ? o.batch_size : seed_batch;
  to.max_steps = o.max_steps;
  to.parallel.device = o.device;
  to.metrics = o.metrics;
  to.model_size = o.model;
  Trainer<Net, Opt, SingleDevice<Backend>, Precision> trainer(std::move(opt), to);
  std::printf("model %s on %s (device %d, %s): %zu training and %zu test images, batch %zu\n", o.model.c_str(),
              Backend::name, o.device, o.precision.c_str(), train_set.size(), test_set.size(), to.batch_size);
  const auto history = trainer.fit(train_set, o.epochs, &test_set);
  if (!history.empty() && history.back().test_accuracy)
    std::printf("test accuracy: %.2f%%\n", *history.back().test_accuracy);
  return 0;
}

/// The seed's model and optimiser: A (seed 000: Adadelta lr 0.5, batch 128) or B (seed 001: SGD
/// lr 1e-4, batch 100).
template <class Backend, class Precision>
int train_on_device_as(const DeviceTrainOptions& o) {
  using namespace cohort;
  if (o.model == "B") return train_on_device_in<Backend, Precision, models::ModelB>(o, Sgd({.lr = 1e-4}), 100);
  return train_on_device_in<Backend, Precision, models::ModelA>(o, Adadelta({.lr = 0.5}), 128);
}

/// The run in the precision --precision names (one trainer instantiation each).
template <class Backend>
int train_on_device(const DeviceTrainOptions& o) {
  using namespace cohort;
  if (o.precision == "fp16") return train_on_device_as<Backend, MixedPrecision<fp16>>(o);
  if (o.precision == "bf16") return train_on_device_as<Backend, MixedPrecision<bf16>>(o);
  return train_on_device_as<Backend, FullPrecision>(o);
}
