// ImageFolder's cost (issue 34), one configuration per process (bench/image_folder.py alternates
// them and runs torchvision's DataLoader on the same files):
//
//   cohort_image_folder train --root /tmp/fmnist_png/train --model A --source folder --workers 2
//   cohort_image_folder train --root /tmp/fmnist_png/train --model resnet20 --source memory
//   cohort_image_folder decode --root /tmp/jpeg224 --workers 1 --images 512
//
// train: a Trainer (the model's seed optimiser, batch 128, --threads CPU threads, 2 by default) on the first --samples
// images of the folder, read through ImageFolder (decoded by --workers threads on the prefetch
// thread while the step runs) or, with --source memory, the same pixels decoded once beforehand
// (ImageFolder::to_memory). One untimed epoch over those samples, then --repeats timed epochs;
// the reported step time is the median epoch's. decode: RandomResizedCrop(224) + flip + Normalize
// of --images JPEG files in batches of 64 by --workers threads (0: the calling thread), after one
// untimed pass; images/s and images/s per decoding core. Both print one JSON line with the peak
// resident memory.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <cohort/cohort.hpp>
#include <cohort/data/image_folder.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>

#include "bench_common.hpp"

using namespace cohort;

namespace {

/// The first n samples of a dataset, read the way the dataset is read (decoded or in memory).
template <class D>
struct FirstN {
  using shape = typename D::shape;
  const D* d;
  std::size_t n;
  std::size_t size() const { return n; }
  std::size_t num_classes() const { return d->num_classes(); }
  std::int32_t label(std::size_t i) const { return d->label(i); }
  const float* image(std::size_t i) const requires requires(const D& x) { x.image(i); }
  { return d->image(i); }
  void load_samples(std::span<const std::size_t> idx, std::span<float> out,
                    const SampleDraw& draw) const requires SampleLoadingData<D> {
    d->load_samples(idx, out, draw);
  }
};

bool prefetch = true;             // --no-prefetch: gather (and decode) on the training thread, between steps
std::size_t prefetch_batches = 2; // --prefetch-batches: TrainerOptions::prefetch_batches
std::size_t compute_threads = 2;  // --threads: TrainerOptions::threads (1 leaves a core to the decoding)

template <class Net, class Opt, class Data>
std::vector<double> epoch_seconds(const Data& data, Opt opt, std::size_t repeats) {
  TrainerOptions o{.batch_size = 128, .threads = compute_threads, .seed = 1, .log = nullptr, .prefetch = prefetch};
  o.prefetch_batches = prefetch_batches;
  Trainer<Net, Opt> t(std::move(opt), o);
  std::vector<double> s;
  for (std::size_t r = 0; r <= repeats; ++r) s.push_back(t.fit_epoch(data).seconds);
  s.erase(s.begin()); // the untimed first epoch
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("cohort_image_folder");
  CLI::App app{"ImageFolder's cost: training from a folder, and JPEG decoding"};
  app.require_subcommand(1);
  std::string root, model = "A", source = "folder";
  std::size_t workers = 2, samples = 12800, repeats = 3, images = 512;
  auto* train = app.add_subcommand("train", "step time of a Trainer reading the folder");
  train->add_option("--root", root)->required();
  train->add_option("--model", model)->check(CLI::IsMember({"A", "resnet20"}));
  train->add_option("--source", source)->check(CLI::IsMember({"folder", "memory"}));
  train->add_option("--workers", workers);
  train->add_option("--samples", samples);
  train->add_option("--repeats", repeats);
  bool cache = false, no_prefetch = false;
  train->add_flag("--no-prefetch", no_prefetch, "TrainerOptions::prefetch = false");
  train->add_flag("--cache", cache, "ImageFolderOptions::cache: decode each file once");
  train->add_option("--prefetch-batches", prefetch_batches, "TrainerOptions::prefetch_batches");
  train->add_option("--threads", compute_threads, "TrainerOptions::threads (the step's compute threads)");
  auto* decode = app.add_subcommand("decode", "decode + RandomResizedCrop(224) rate of a JPEG folder");
  decode->add_option("--root", root)->required();
  decode->add_option("--workers", workers);
  decode->add_option("--images", images);
  decode->add_option("--repeats", repeats);
  CLI11_PARSE(app, argc, argv);

  if (*train) {
    prefetch = !no_prefetch;
    using Folder = ImageFolder<Shape<1, 28, 28>>;
    const Folder folder = Folder::open(root, {.normalization = {0.2860f, 0.3530f}, .workers = workers, .cache = cache});
    samples = std::min(samples, folder.size());
    std::vector<double> s;
    auto run = [&](const auto& data) {
      if (model == "A")
        s = epoch_seconds<models::ModelA>(data, Adadelta({.lr = 1.0}), repeats);
      else
        s = epoch_seconds<models::ResNet20>(data, Sgd({.lr = 0.1, .momentum = 0.9}), repeats);
    };
    if (source == "folder") {
      run(FirstN<Folder>{&folder, samples});
    } else {
      const auto memory = folder.to_memory();
      run(FirstN<ImageDataset<Shape<1, 28, 28>>>{&memory, samples});
    }
    const double steps = double((samples + 127) / 128);
    std::printf("{\"bench\": \"image_folder_train\", \"model\": \"%s\", \"source\": \"%s\", \"workers\": %zu, "
                "\"threads\": %zu, \"prefetch_batches\": %zu, \"samples\": %zu, \"step_ms\": %.3f, \"epoch_s\": [",
                model.c_str(), (source + (cache ? "-cached" : "") + (no_prefetch ? "-serial" : "")).c_str(), workers,
                compute_threads, no_prefetch ? 0 : prefetch_batches, samples, 1e3 * median(s) / steps);
    for (std::size_t i = 0; i < s.size(); ++i) std::printf("%s%.4f", i ? ", " : "", s[i]);
    std::printf("], \"peak_rss_mib\": %.1f}\n", bench::peak_rss_mib());
    return 0;
  }

  using Folder = ImageFolder<Shape<3, 224, 224>>;
  const Folder folder = Folder::open(
      root, {.crop = FolderCrop::random_resized,
             .horizontal_flip = true,
             .normalization = Normalization::per_channel({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}),
             .workers = workers,
             .check = FolderCheck::none});
  images = std::min(images, folder.size());
  std::vector<float> out(64 * Shape<3, 224, 224>::size);
  std::vector<double> rates;
  for (std::size_t r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t first = 0; first < images; first += 64) {
      const std::size_t count = std::min<std::size_t>(64, images - first);
      std::vector<std::size_t> idx(count);
      for (std::size_t i = 0; i < count; ++i) idx[i] = first + i;
      folder.load_samples(idx, {out.data(), count * Shape<3, 224, 224>::size}, {.seed = 1, .epoch = r});
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r) rates.push_back(double(images) / sec); // the first pass warms the page cache
  }
  const double rate = median(rates), cores = double(std::max<std::size_t>(workers, 1));
  std::printf("{\"bench\": \"image_folder_decode\", \"side\": \"cohort\", \"workers\": %zu, \"images\": %zu, "
              "\"images_per_s\": %.1f, \"images_per_s_per_core\": %.1f, \"peak_rss_mib\": %.1f}\n",
              workers, images, rate, rate / cores, bench::peak_rss_mib());
  return 0;
}
