// Dense prediction on Fashion-MNIST: a U-Net (models/unet.hpp) labels every pixel with the
// garment's class or background, trained with the per-pixel cross-entropy and scored by mean IoU.
//
//   ./build/examples/segment_fashion_mnist [--epochs N] [--batch B] [--lr LR] [--train-samples N]
//                                          [--test-samples N] [--data DIR] [--seed S] [--min-miou X]
//                                          [--crop P] [--flip] [--model unet|unet-paper] [--threads T]
//                                          [--trainer [--replicas N] [--metrics FILE] [--save FILE]]
//
// --min-miou: exit status 1 when the final test mean IoU is below X (the ctest smoke test).
// --threads T: CPU threads in all (default: every core the process may use, available_cores(),
// as PyTorch takes): the loop's kernel pool, or with --trainer T / N threads per replica.
// --crop P, --flip: joint augmentation of each training image with its mask (data/joint_augment.hpp):
// a random 28x28 window of the image padded by P pixels (mask padding ignored by the loss), a
// horizontal flip with p = 0.5. --model unet-paper: transposed up-convolutions and GroupNorm
// (models::UNetUpsampling::transposed, models::UNetNorm::group) instead of bilinear and BatchNorm.
// --trainer: the same recipe through cohort::Trainer (train/trainer.hpp) instead of the loop below:
// every batch of the epoch (the last one short), ThreadedReplicas<N> with --replicas N (one by
// default), the Trainer's epoch lines, a metrics file (--metrics, with "test_mean_iou") and a
// checkpoint (--save) that resumes exactly.
//
// The task (issue 38), a rule anyone can rebuild: pixel (h, w) of image n is class label[n] + 1
// (1..10, the garment) where its byte is at least 64 (a quarter of full scale), else class 0
// (background): 11 classes. Inputs are torchvision's ToTensor + Normalize((0.2860,), (0.3530,)).
// The recipe: models::UNet<Shape<1, 28, 28>, 11, 16, 2> (118,475 parameters), Adam (lr 1e-3), batch 64, samples in a
// seeded random order each epoch; evaluated on the 10,000 test images. Prints per epoch the
// training loss, test pixel accuracy and mean IoU, and the seconds the epoch took;
// bench/segment_reference.py runs PyTorch on the same recipe.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/data/dense_dataset.hpp>
#include <cohort/loss/pixel_cross_entropy_loss.hpp>
#include <cohort/models/unet.hpp>
#include <cohort/train/segmentation_metrics.hpp>

using namespace cohort;

namespace {
constexpr std::size_t pixels = 28 * 28;
constexpr std::uint8_t foreground_threshold = 64;

using In = Shape<1, 28, 28>;
using Data = MaskDataset<In>;

// The task's rule, applied to a split's images and labels (the first `limit` of them).
Data load(const std::filesystem::path& dir, cohort::Split which, std::size_t limit) {
  const IdxFiles files = find_idx_files(dir, which);
  const IdxArray x = read_idx(files.images, idx_images_magic);
  const IdxArray y = read_idx(files.labels, idx_labels_magic);
  if (x.dims.size() != 3 || x.dims[1] != 28 || x.dims[2] != 28 || y.dims.size() != 1 || y.dims[0] != x.dims[0])
    throw ShapeError(detail::concat(files.images.string(), ": expected N x 28 x 28 images with N labels"));
  const std::size_t n = std::min<std::size_t>(x.dims[0], limit);
  const std::span<const std::uint8_t> images = std::span(x.values).first(n * pixels);
  std::vector<std::uint8_t> masks(n * pixels);
  for (std::size_t s = 0; s < n; ++s) {
    if (y.values[s] > 9)
      throw ValueError(
          detail::concat(files.labels.string(), ": label of sample ", s, " is ", int(y.values[s]), ", expected 0..9"));
    for (std::size_t p = 0; p < pixels; ++p)
      masks[s * pixels + p] = images[s * pixels + p] >= foreground_threshold ? std::uint8_t(y.values[s] + 1) : 0;
  }
  return Data::from_pixels(images, masks, 11, Normalization{0.2860f, 0.3530f});
}

template <class Net>
int run(const Data& train, const Data& test, int epochs, std::size_t batch, double lr, std::uint64_t seed,
        double min_miou, const JointAugmentation& aug) {
  using Out = typename Net::output_shape;
  check_dense_data<Net>(train, "training");
  check_dense_data<Net>(test, "test");
  Network<Net> net(seed);
  PixelCrossEntropyLoss<float> loss;
  Adam opt({.lr = lr});
  std::vector<std::size_t> order(train.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 gen(seed);
  std::vector<float> xb(batch * pixels);
  std::vector<std::int32_t> yb(batch * pixels);
  double miou = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    std::shuffle(order.begin(), order.end(), gen);
    net.train();
    double loss_sum = 0;
    std::size_t steps = 0;
    for (std::size_t b = 0; b + batch <= train.size(); b += batch) { // full batches only, as drop_last
      train.load_batch(std::span(order).subspan(b, batch), xb, yb, aug, {.seed = seed, .epoch = std::uint64_t(epoch)});
      loss_sum += loss.forward(net.forward(ConstBatchView<In, float>(xb.data(), batch)), yb);
      net.backward(loss.backward());
      opt.step(net);
      ++steps;
    }
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    net.eval();
    SegmentationMetrics m(Out::extents[0]);
    for (std::size_t b = 0; b < test.size(); b += batch) {
      const std::size_t n = std::min(batch, test.size() - b);
      m.add(net.forward(ConstBatchView<In, float>(test.image(b), n)), test.masks().subspan(b * pixels, n * pixels));
    }
    miou = m.mean_iou();
    std::printf("epoch %d: train loss %.4f, %.1f s (%.0f samples/s); test pixel accuracy %.4f, mean IoU %.4f\n", epoch,
                loss_sum / double(steps), train_s, double(steps * batch) / train_s, m.pixel_accuracy(), miou);
    std::fflush(stdout);
  }
  std::printf("Test mean IoU: %.4f\n", miou);
  if (miou < min_miou) {
    std::fprintf(stderr, "segment_fashion_mnist: mean IoU %.4f is below --min-miou %.4f\n", miou, min_miou);
    return 1;
  }
  return 0;
}

/// The recipe through the Trainer: what a user of the library writes.
template <class Net>
int run_trainer(const Data& train, const Data& test, int epochs, std::size_t batch, double lr, std::uint64_t seed,
                double min_miou, const JointAugmentation& aug, std::size_t replicas, std::size_t threads,
                const std::filesystem::path& metrics, const std::filesystem::path& save) {
  TrainerOptions o{.batch_size = batch, .seed = seed, .log_interval = 0, .metrics = metrics};
  o.parallel.replicas = replicas;
  o.threads = threads; // shared among the replicas' pools (parallel.threads_per_replica = 0)
  o.joint_augment = aug;
  Trainer<Net, Adam<>, ThreadedReplicas<dynamic_replicas>> trainer(Adam({.lr = lr}), o);
  const std::vector<EpochReport> history = trainer.fit(train, std::size_t(epochs), &test);
  if (!save.empty()) trainer.save(save);
  const double miou = *history.back().test_mean_iou;
  std::printf("Test mean IoU: %.4f\n", miou);
  if (miou < min_miou) {
    std::fprintf(stderr, "segment_fashion_mnist: mean IoU %.4f is below --min-miou %.4f\n", miou, min_miou);
    return 1;
  }
  return 0;
}

const char* arg(int& i, int argc, char** argv) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "segment_fashion_mnist: %s needs a value\n", argv[i]);
    std::exit(2);
  }
  return argv[++i];
}
} // namespace

int main(int argc, char** argv) {
  int epochs = 3;
  std::size_t batch = 64, train_samples = 60000, test_samples = 10000;
  double lr = 1e-3, min_miou = 0;
  std::uint64_t seed = 0;
  std::size_t crop = 0;
  bool flip = false, use_trainer = false;
  std::size_t replicas = 1, threads = available_cores().threads;
  std::filesystem::path metrics, save;
  std::string model = "unet";
  std::filesystem::path dir = default_data_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--epochs")
      epochs = std::atoi(arg(i, argc, argv));
    else if (a == "--batch")
      batch = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--lr")
      lr = std::atof(arg(i, argc, argv));
    else if (a == "--train-samples")
      train_samples = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--test-samples")
      test_samples = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--min-miou")
      min_miou = std::atof(arg(i, argc, argv));
    else if (a == "--data")
      dir = arg(i, argc, argv);
    else if (a == "--seed")
      seed = std::uint64_t(std::atoll(arg(i, argc, argv)));
    else if (a == "--crop")
      crop = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--flip")
      flip = true;
    else if (a == "--trainer")
      use_trainer = true;
    else if (a == "--replicas")
      replicas = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--threads")
      threads = std::size_t(std::atol(arg(i, argc, argv)));
    else if (a == "--metrics")
      metrics = arg(i, argc, argv);
    else if (a == "--save")
      save = arg(i, argc, argv);
    else if (a == "--model" && i + 1 < argc &&
             (std::string(argv[i + 1]) == "unet" || std::string(argv[i + 1]) == "unet-paper"))
      model = arg(i, argc, argv);
    else {
      std::fprintf(stderr,
                   "usage: segment_fashion_mnist [--epochs N] [--batch B] [--lr LR] [--test-samples N] [--min-miou X] "
                   "[--train-samples N] [--data DIR] [--seed S] [--crop P] [--flip] [--model unet|unet-paper] "
                   "[--threads T] [--trainer [--replicas N] [--metrics FILE] [--save FILE]]\n");
      return 2;
    }
  }
  if (epochs < 1 || batch < 1 || test_samples < 1 || replicas < 1 || threads < 1) {
    std::fprintf(
        stderr,
        "segment_fashion_mnist: --epochs, --batch, --test-samples, --replicas and --threads must be positive\n");
    return 2;
  }
  set_num_threads(threads); // the loop's kernels; the Trainer's replicas take their share of it
  if (!use_trainer && (replicas != 1 || !metrics.empty() || !save.empty())) {
    std::fprintf(stderr, "segment_fashion_mnist: --replicas, --metrics and --save go with --trainer\n");
    return 2;
  }
  try {
    const Data train = load(dir, cohort::Split::train, train_samples);
    const Data test = load(dir, cohort::Split::test, test_samples);
    JointAugmentation aug;
    if (crop > 0) aug.add(JointRandomCrop(28, crop, Normalization{0.2860f, 0.3530f}));
    if (flip) aug.add(JointRandomHorizontalFlip());
    std::printf("U-Net width 16, depth 2, 11 classes (%s); %zu training images, %zu test images, batch %zu%s%s\n",
                model == "unet" ? "bilinear, BatchNorm" : "transposed convolutions, GroupNorm", train.size(),
                test.size(), batch, aug.empty() ? "" : "; augmentation ", aug.names().c_str());
    using UNet = models::UNet<In, 11, 16, 2>;
    using PaperUNet = models::UNet<In, 11, 16, 2, models::UNetUpsampling::transposed, models::UNetNorm::group>;
    if (use_trainer) {
      if (model == "unet")
        return run_trainer<UNet>(train, test, epochs, batch, lr, seed, min_miou, aug, replicas, threads, metrics, save);
      return run_trainer<PaperUNet>(train, test, epochs, batch, lr, seed, min_miou, aug, replicas, threads, metrics,
                                    save);
    }
    if (model == "unet") return run<UNet>(train, test, epochs, batch, lr, seed, min_miou, aug);
    return run<PaperUNet>(train, test, epochs, batch, lr, seed, min_miou, aug);
  } catch (const Error& e) {
    std::fprintf(stderr, "segment_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
