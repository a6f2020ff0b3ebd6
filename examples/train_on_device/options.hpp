// train_on_device's command line and the dispatch to the model's translation unit: what
// main_cuda.cu and main_omp.cpp include (the trainers are in train_on_device.hpp, instantiated
// once per model by model.in). See train_on_device.hpp for the flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

struct DeviceTrainOptions {
  std::string model = "A";
  std::string data_dir = "/usr/share/datasets/fashion-mnist"; // cohort::default_data_dir
  std::size_t epochs = 1, batch_size = 0, max_steps = 0;      // batch 0: the recipe's
  int device = 0;
  std::vector<std::string> precisions{"fp32"};
  bool allow_tf32 = false;
  std::string metrics;
  bool shuffle = true;
  std::size_t log_interval = 10;
  std::uint64_t seed = 0;
  // Timing (windows > 0) and profiling.
  std::size_t windows = 0, warmup_steps = 20, window_steps = 50, profile_steps = 0;
  std::string timing;
};

namespace train_on_device_detail {
inline bool one_of(std::string_view v, std::initializer_list<std::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}
inline std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    const std::size_t comma = v.find(',');
    out.emplace_back(v.substr(0, comma));
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
  }
  return out;
}
} // namespace train_on_device_detail

/// Parses the flags above; exits with a message on anything else.
inline DeviceTrainOptions parse_device_train_options(int argc, char** argv) {
  using train_on_device_detail::one_of;
  DeviceTrainOptions o;
  auto usage = [&] {
    std::fprintf(stderr,
                 "usage: %s [--model A|B|C|D|resnet] [--data-dir DIR] [--epochs N] [--batch-size N] [--max-steps N] "
                 "[--device I] [--precision fp32,tf32,fp16,bf16] [--allow-tf32] [--metrics FILE] [--no-shuffle] "
                 "[--log-interval N] [--seed N] [--windows N [--warmup-steps N] [--window-steps N] [--timing FILE]] "
                 "[--profile-steps N]\n",
                 argv[0]);
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto number = [&] {
      char* end = nullptr;
      if (!v || !*v) usage();
      const unsigned long long n = std::strtoull(v, &end, 10);
      if (*end) usage();
      ++i;
      return n;
    };
    auto text = [&] {
      if (!v) usage();
      ++i;
      return std::string(v);
    };
    if (a == "--data-dir") {
      o.data_dir = text();
    } else if (a == "--model" && v && one_of(v, {"A", "B", "C", "D", "resnet"})) {
      o.model = text();
    } else if (a == "--precision" && v) {
      o.precisions = train_on_device_detail::split_list(text());
      for (const auto& p : o.precisions)
        if (!one_of(p, {"fp32", "tf32", "fp16", "bf16"})) usage();
      if (o.precisions.empty()) usage();
    } else if (a == "--allow-tf32") {
      o.allow_tf32 = true;
    } else if (a == "--metrics") {
      o.metrics = text();
    } else if (a == "--timing") {
      o.timing = text();
    } else if (a == "--no-shuffle") {
      o.shuffle = false;
    } else if (a == "--epochs") {
      o.epochs = number();
    } else if (a == "--batch-size") {
      o.batch_size = number();
    } else if (a == "--max-steps") {
      o.max_steps = number();
    } else if (a == "--log-interval") {
      o.log_interval = number();
    } else if (a == "--seed") {
      o.seed = number();
    } else if (a == "--device") {
      o.device = int(number());
    } else if (a == "--windows") {
      o.windows = number();
    } else if (a == "--warmup-steps") {
      o.warmup_steps = number();
    } else if (a == "--window-steps") {
      o.window_steps = number();
    } else if (a == "--profile-steps") {
      o.profile_steps = number();
    } else {
      usage();
    }
  }
  if (o.windows && o.window_steps == 0) usage();
  return o;
}

// One per model, each in its own translation unit (model.in).
int train_on_device_model_a(const DeviceTrainOptions&);
int train_on_device_model_b(const DeviceTrainOptions&);
int train_on_device_model_c(const DeviceTrainOptions&);
int train_on_device_model_d(const DeviceTrainOptions&);
int train_on_device_model_resnet(const DeviceTrainOptions&);

/// The run --model names.
inline int train_on_device(const DeviceTrainOptions& o) {
  if (o.model == "B") return train_on_device_model_b(o);
  if (o.model == "C") return train_on_device_model_c(o);
  if (o.model == "D") return train_on_device_model_d(o);
  if (o.model == "resnet") return train_on_device_model_resnet(o);
  return train_on_device_model_a(o);
}
