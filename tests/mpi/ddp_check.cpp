// ProcessGroupDDP<Mpi> under mpirun: what tests/mpi/run_ddp.cmake checks.
//
//   mpirun -np N ddp_check equivalence [--deterministic] --out FILE
//       trains model C for 2 epochs of 128 synthetic samples (global batch 32); rank 0 writes
//       the final weights to FILE, and checks them against one process (SingleDevice, batch 32,
//       within 1e-6) and, in deterministic mode, against ThreadedReplicas<4> (bitwise).
//       --bucket-kib K sets the gradient bucket size (default 256 KiB: three buckets).
//       --augment trains with RandomCrop(28, 3) + RandomHorizontalFlip: keyed by the dataset
//       sample, so N ranks still equal ThreadedReplicas<4> bitwise.
//   mpirun -np N ddp_check recipe [--out FILE]
//       deterministic model B with the ResNet recipe's pieces: parameter groups (no decay on
//       norms and biases), gradient clipping, a warm-up + cosine schedule, label smoothing, class
//       weights, crop + flip: bitwise equal to ThreadedReplicas<4>, the same gradient norm on
//       every rank, and clipping engaged at the last step.
//   mpirun -np N ddp_check resume --save FILE | --resume FILE --out FILE [--per-rank]
//       deterministic model A: 1 epoch then a checkpoint (any world size), or resume + 1 epoch
//       into a trainer built with another seed (the checkpoint's must win), checking the step
//       and epoch right after loading.
//   mpirun -np N ddp_check resnet
//       ResNet-20 (residual blocks, BatchNorm), 2 steps: N ranks x batch 16/N against one process
//       on batch 16 normalising the same per-rank groups of samples, per tensor within 1e-5; in
//       deterministic mode bitwise equal
//   mpirun -np 2 ddp_check mismatch     rank 1 builds a wider network: every rank must say so
//   mpirun -np 3 --enable-recovery ddp_check fault --signal stop|kill --at TEXT [--at-step N] --stamp FILE
//       model C, 2 epochs with evaluation, then a checkpoint, with a 3 s deadline; rank 1 stops
//       or dies right after starting the first collective whose name contains TEXT (at step
//       N). Every survivor must fail with cohort's message naming rank 1, the operation and the
//       step (run_ddp.cmake checks the text and the time since the fault). --rank2-timeout S
//       gives rank 2 a longer deadline: it must still stop with the first survivor that gives up.
//   mpirun -np N ddp_check compressed --compress bf16|fp16 [--error-feedback] [--deterministic] --limit L [--out FILE]
//       model C as in equivalence with 16-bit gradient buckets: identical on every rank, within L
//       of one float process per tensor and not equal to it; --rank1-compress X: rank 1 alone
//       uses X (every rank must refuse to start)
//   mpirun -np N ddp_check placement
//       prints "placement: rank R of N host H local_rank L local_size S" for every rank, as the
//       communicator sees it (tests/mpi/netns_cluster.py checks R = node * K + L on emulated nodes)
//   mpirun -np N ddp_check linkcut --stamp FILE
//       model C with a 3 s deadline, epoch after epoch for up to 120 s; rank 0 writes FILE after
//       its third epoch, when the harness cuts a node's data link. Every rank must fail with
//       cohort's message naming a rank it can no longer hear (netns_cluster.py checks it).
//   mpirun -np 2 ddp_check accumulate   2 micro-batches per step == one batch twice the size
//   mpirun -np N ddp_check freeze       deterministic model B, backbone frozen: bitwise equal to
//       ThreadedReplicas<4>, the backbone as initialised, no bucket holding a frozen tensor
//   mpirun -np N ddp_check segment      a U-Net on masks (class weights, ignored pixels, joint
//       crop and flip), deterministic: bitwise ThreadedReplicas<4>, the same evaluation on every rank
//   mpirun -np N ddp_check regress      a U-Net on two-channel target images (HuberLoss, joint crop
//       and flip), deterministic: bitwise ThreadedReplicas<4>, the same evaluation on every rank
//   mpirun -np N ddp_check overflow     MixedPrecision<fp16>: an inf gradient on the last rank
//       only; every rank must skip the step together (weights and optimiser untouched, scale
//       halved, one skipped step), then take the next clean one together
//
// Exit status: 0 on success, 1 on a failed check, 3 when a cohort::Error was thrown (the tests
// that expect one match its message).

#include <cohort/cohort.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/models/unet.hpp>
#include <cohort/mpi.hpp>
#include <cohort/precision/mixed_precision.hpp>
#include <cohort/train/trainer.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mpi/ddp_support.hpp"
#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/mask_bands.hpp"
#include "support/noisy_bands.hpp"

using namespace cohort;
using test::Bands;
using test::check_identical;
using test::values;
using test::world_rank;
using test::world_size;
using test::worst_tensor_difference;

namespace {

struct Args {
  std::string mode, out, save, resume;
  bool deterministic = false;
  bool per_rank = false; // resume: not in deterministic mode (error feedback's per-rank residuals)
  test::Fault fault;
  double rank2_timeout = 3.0; // the fault cases' deadline on rank 2 (3 s on the others)
};

using Wider = Sequential<Input<1, 28, 28>, Conv2d<1, 32, 3, 1, 1>, ReLU, MaxPool2d<2>, Flatten, Linear<6272, 128>, ReLU,
                         Linear<128, 10>>;

void write(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

std::size_t bucket_kib = 256;
bool augment = false;
GradientCompression compression = GradientCompression::none;
bool error_feedback = false;

TrainerOptions options(std::size_t batch, bool deterministic, double timeout = 60) {
  TrainerOptions o{.batch_size = batch, .seed = 11, .log = nullptr};
  o.parallel.deterministic = deterministic;
  o.parallel.deterministic_chunks = 4;
  o.parallel.bucket_kib = bucket_kib;
  o.parallel.timeout_s = timeout;
  o.parallel.compression = compression;
  o.parallel.error_feedback = error_feedback;
  if (augment) o.augment = Augmentation{RandomCrop(28, 3), RandomHorizontalFlip()};
  return o;
}

Sgd<> sgd() { return Sgd({.lr = 0.05, .momentum = 0.9}); }

/// Model C, 2 epochs of `data` at global batch `global` over the ranks with the current
/// options: the weights, after checking that every rank holds the same (`failed` otherwise);
/// rank 0 writes them to a.out.
std::vector<float> trained_over_ranks(const Args& a, const Bands& data, std::size_t global, int& failed) {
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> ddp(
      sgd(), options(global / std::size_t(world_size()), a.deterministic));
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  failed |= check_identical("ddp_check", w);
  if (world_rank() == 0 && !a.out.empty()) write(a.out, w);
  return w;
}

/// The worst per-tensor difference (relative to the tensor's largest value) between `w` and one
/// process trained on the same data at batch `global` with float gradients.
std::pair<double, std::string> difference_from_one_process(const std::vector<float>& w, const Bands& data,
                                                           std::size_t global) {
  TrainerOptions o = options(global, false);
  o.parallel.compression = GradientCompression::none; // one process sends nothing
  o.parallel.error_feedback = false;
  Trainer<models::ModelC, Sgd<>> one(sgd(), o);
  one.fit(data, 2);
  return worst_tensor_difference<models::ModelC>(w, values(one.parameters()));
}

int equivalence(const Args& a) {
  const Bands data(128, 1);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size());
  int failed = 0;
  const auto w = trained_over_ranks(a, data, global, failed);
  if (world_rank() != 0) return failed;
  if (a.deterministic) {
    Trainer<models::ModelC, Sgd<>, ThreadedReplicas<4>> threads(sgd(), options(global, true));
    threads.fit(data, 2);
    const bool same = values(threads.parameters()) == w;
    std::printf("deterministic%s, %d rank(s): %s ThreadedReplicas<4>\n", augment ? ", augmented" : "", world_size(),
                same ? "bitwise equal to" : "DIFFERENT from");
    failed |= !same;
  } else {
    const auto [d, worst] = difference_from_one_process(w, data, global);
    std::printf("%d rank(s) x batch %zu vs 1 process x batch %zu: worst tensor %s differs by %.3g of its largest value "
                "(limit 1e-6)\n",
                world_size(), per_rank, global, worst.c_str(), d);
    failed |= !(d <= 1e-6);
  }
  return failed;
}

/// The ResNet recipe's settings on model B (BatchNorm, biases): SGD with Nesterov momentum,
/// weight decay except on norms and biases, gradients clipped to a norm the step exceeds, a
/// warm-up + cosine schedule, label smoothing with class weights, crop + flip. Deterministic mode: N ranks are bitwise
/// one process (ThreadedReplicas<4>), so every rank clipped by the same norm as the single process did.
int recipe(const Args& a) {
  const Bands data(128, 1);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size());
  constexpr double max_norm = 0.05;
  const auto recipe_options = [&](std::size_t batch) {
    TrainerOptions o = options(batch, true);
    o.parameter_groups = no_decay_on_norms_and_biases();
    o.max_grad_norm = max_norm;
    o.lr_schedule = LrSchedule::parse("cosine,warmup=1,t_max=2");
    // Class weights make each rank's share depend on every rank's labels (all-reduced counts).
    o.loss = {.label_smoothing = 0.1, .class_weights = {1.f, 2.f, 1.f, 1.f, 0.5f, 1.f, 1.f, 1.f, 3.f, 1.f}};
    o.augment = Augmentation{RandomCrop(28, 3), RandomHorizontalFlip()};
    return o;
  };
  const auto opt = [] { return Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}); };
  Trainer<models::ModelB, Sgd<>, ProcessGroupDDP<Mpi>> ddp(opt(), recipe_options(per_rank));
  ddp.fit(data, 3);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_check", w);
  const double norm = ddp.last_grad_norm();
  failed |= check_identical("ddp_check", std::vector<float>{float(norm)}); // every rank clipped alike
  if (world_rank() != 0) return failed;
  if (!a.out.empty()) write(a.out, w);
  Trainer<models::ModelB, Sgd<>, ThreadedReplicas<4>> threads(opt(), recipe_options(global));
  threads.fit(data, 3);
  const bool same = values(threads.parameters()) == w && threads.last_grad_norm() == norm;
  std::printf("recipe, %d rank(s): last gradient norm %.6g (clipped to %g): %s ThreadedReplicas<4>\n", world_size(),
              norm, max_norm, same ? "bitwise equal to" : "DIFFERENT from");
  failed |= !same;
  failed |= !(norm > max_norm); // the clipping was engaged: otherwise the test proves nothing
  return failed;
}

/// Deterministic model A (dropout): a straight 2-epoch run, or 1 epoch + checkpoint, or a resume
/// from that checkpoint for the second epoch, at any world size.
int resume(const Args& a) {
  const Bands data(64, 2);
  const std::size_t per_rank = 32 / std::size_t(world_size());
  TrainerOptions o = options(per_rank, !a.per_rank);
  if (!a.resume.empty()) o.seed = 12; // other initial weights, dropout and shuffling: resume must replace them
  Trainer<models::ModelA, Adadelta<>, ProcessGroupDDP<Mpi>> t(Adadelta({.lr = 0.5}), o);
  if (!a.resume.empty()) {
    t.resume(a.resume);
    if (t.step() != 2 || t.epoch() != 1 || t.seed() != 11) { // 64 samples, global batch 32: 2 steps
      std::fprintf(stderr, "ddp_check: rank %d: resumed at step %llu, epoch %llu, seed %llu (expected 2, 1, 11)\n",
                   world_rank(), static_cast<unsigned long long>(t.step()), static_cast<unsigned long long>(t.epoch()),
                   static_cast<unsigned long long>(t.seed()));
      return 1;
    }
  }
  t.fit(data, a.save.empty() ? 2 : 1);
  if (!a.save.empty()) t.save(a.save);
  const auto w = values(t.parameters());
  if (world_rank() == 0 && !a.out.empty()) write(a.out, w);
  return check_identical("ddp_check", w);
}

/// ResNet-20 across ranks, BatchNorm included: each rank normalises its own samples (DDP's
/// semantics), so the one-process reference computes the same groups: deterministic mode with
/// one chunk per rank (chunk j holds global samples j, j + world, ...: rank j's share under
/// DistributedSampler), summed in chunk order.
int resnet() {
  using Net = models::ResNet20;
  const Bands data(32, 6);
  const std::size_t world = std::size_t(world_size()), global = 16, per_rank = global / world;
  const auto sgd_nesterov = [] { return Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}); };
  std::vector<float> reference; // one process, 2 steps
  if (world_rank() == 0) {
    TrainerOptions g = options(global, true);
    g.parallel.deterministic_chunks = world;
    Trainer<Net, Sgd<>, ThreadedReplicas<1>> one(sgd_nesterov(), g);
    one.fit(data, 1);
    reference = values(one.parameters());
  }
  int failed = 0;
  for (bool deterministic : {false, true}) {
    TrainerOptions o = options(per_rank, deterministic);
    o.parallel.deterministic_chunks = world;
    Trainer<Net, Sgd<>, ProcessGroupDDP<Mpi>> ddp(sgd_nesterov(), o);
    ddp.fit(data, 1);
    const auto w = values(ddp.parameters());
    failed |= check_identical("ddp_check", w);
    if (world_rank() != 0) continue;
    if (deterministic) {
      const bool same = w == reference;
      std::printf("ResNet-20 deterministic, %zu rank(s) x batch %zu: %s one process x batch %zu\n", world, per_rank,
                  same ? "bitwise equal to" : "DIFFERENT from", global);
      failed |= !same;
    } else {
      const auto [d, worst] = worst_tensor_difference<Net>(w, reference);
      std::printf("ResNet-20, %zu rank(s) x batch %zu vs 1 process x batch %zu: worst tensor %s differs by %.3g of "
                  "its largest value (limit 1e-5)\n",
                  world, per_rank, global, worst.c_str(), d);
      failed |= !(d <= 1e-5);
    }
  }
  return failed;
}

/// Rank 1 builds another network: every rank must stop with the difference.
int mismatch() {
  if (world_rank() == 1) {
    Trainer<Wider, Sgd<>, ProcessGroupDDP<Mpi>> t(sgd(), options(16, false));
  } else {
    Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> t(sgd(), options(16, false));
  }
  std::fprintf(stderr, "ddp_check: rank %d: the mismatch went unnoticed\n", world_rank());
  return 1;
}

/// Every collective of a run: start-up (agreement, rank 0's parameters), gradient buckets and
/// the loss in each step, the evaluation sums after each epoch, the checkpoint's barriers. Rank
/// 1 stops or dies inside the one `a.fault` names; the others must fail within the deadline (3 s).
int fault(const Args& a) {
  test::arm(a.fault, "ddp_check");
  const Bands data(72, 3), test(30, 4); // 3 ranks x batch 8: 3 steps per epoch
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> t(sgd(),
                                                         options(8, false, world_rank() == 2 ? a.rank2_timeout : 3.0));
  t.fit(data, 2, &test);
  t.save(a.save);
  std::fprintf(stderr, "ddp_check: rank %d: training went on without rank 1\n", world_rank());
  return 1;
}

/// Model C, 2 epochs, global batch 32, gradients sent as --compress (with --error-feedback or
/// not) over N ranks: every rank holds the same weights; against one process in float they are
/// within `limit` of each tensor's largest value and not equal (the rounding happened).
int compressed(const Args& a, double limit) {
  const Bands data(128, 1);
  const std::size_t global = 32;
  int failed = 0;
  const auto w = trained_over_ranks(a, data, global, failed);
  if (world_rank() != 0) return failed;
  const auto [d, worst] = difference_from_one_process(w, data, global);
  std::printf("%s%s%s, %d rank(s): worst tensor %s differs from one float process by %.3g of its largest value "
              "(limit %.3g)\n",
              std::string(compression_name(compression)).c_str(), error_feedback ? " with error feedback" : "",
              a.deterministic ? ", deterministic" : "", world_size(), worst.c_str(), d, limit);
  failed |= !(d <= limit) || d == 0;
  return failed;
}

/// A dataset that writes its batches itself, as ImageFolder does (SampleLoadingData), and
/// records which samples each rank was asked for.
struct LoadingBands {
  using shape = Bands::shape;
  const Bands* data;
  mutable std::mutex mutex; // load_samples runs on the prefetch thread
  mutable std::vector<std::size_t> loaded;
  std::size_t size() const { return data->size(); }
  std::int32_t label(std::size_t i) const { return data->label(i); }
  void load_samples(std::span<const std::size_t> idx, std::span<float> out, const SampleDraw&) const {
    for (std::size_t k = 0; k < idx.size(); ++k)
      std::copy_n(data->image(idx[k]), shape::size, out.data() + k * shape::size);
    const std::lock_guard<std::mutex> g(mutex);
    loaded.insert(loaded.end(), idx.begin(), idx.end());
  }
};

/// Issue 34: under ProcessGroupDDP a rank reads only its own shard. In each of 2 epochs every
/// rank is asked for its DistributedSampler share exactly (size / world samples, none twice),
/// and the ranks' shares are disjoint and make up the epoch.
int shard() {
  const Bands bands(96, 7);
  const LoadingBands data{&bands, {}, {}};
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> t(sgd(), options(8, false));
  const std::size_t share = bands.size() / std::size_t(world_size());
  int failed = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    data.loaded.clear();
    t.fit_epoch(data);
    std::vector<std::size_t> mine = data.loaded;
    std::sort(mine.begin(), mine.end());
    const bool repeated = std::adjacent_find(mine.begin(), mine.end()) != mine.end();
    if (mine.size() != share || repeated) {
      std::fprintf(stderr, "ddp_check: rank %d, epoch %d: asked for %zu samples%s, its shard is %zu\n", world_rank(),
                   epoch, mine.size(), repeated ? " (some twice)" : "", share);
      failed = 1;
    }
    std::vector<unsigned long long> sent(mine.begin(), mine.end()), all(share * std::size_t(world_size()));
    sent.resize(share);
    MPI_Allgather(sent.data(), int(share), MPI_UNSIGNED_LONG_LONG, all.data(), int(share), MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    std::sort(all.begin(), all.end());
    std::vector<unsigned long long> expected(bands.size());
    std::iota(expected.begin(), expected.end(), 0ull);
    if (all != expected) {
      std::fprintf(stderr, "ddp_check: epoch %d: the ranks' shards overlap or miss samples\n", epoch);
      failed = 1;
    }
    if (world_rank() == 0 && !failed)
      std::printf("shard: epoch %d: %d rank(s) each read its %zu samples, disjoint, the epoch's %zu in all\n", epoch,
                  world_size(), share, bands.size());
  }
  return failed;
}

int placement() {
  const MpiCommunicator c(30.0);
  std::printf("placement: rank %d of %d host %s local_rank %d local_size %d\n", c.rank(), c.size(), c.host().c_str(),
              c.local_rank(), c.local_size());
  return 0;
}

int linkcut(const Args& a) {
  const Bands data(24 * std::size_t(world_size()), 3); // 3 steps of batch 8 per rank and epoch
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> t(sgd(), options(8, false, 3.0));
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t epoch = 0; std::chrono::steady_clock::now() - start < std::chrono::seconds(120); ++epoch) {
    t.fit_epoch(data);
    if (epoch == 2 && world_rank() == 0) std::ofstream(a.fault.stamp) << test::now_ms() << "\n";
  }
  std::fprintf(stderr, "ddp_check: rank %d: training went on for 120 s: the link was never cut\n", world_rank());
  return 1;
}

/// 2 micro-batches of 8 per rank and step (no_sync for the first) == 1 process x batch 32.
int accumulate() {
  const Bands data(128, 4);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size()) / 2;
  TrainerOptions o = options(per_rank, false);
  o.accumulation_steps = 2;
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi>> ddp(sgd(), o);
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_check", w);
  if (world_rank() != 0) return failed;
  Trainer<models::ModelC, Sgd<>> one(sgd(), options(global, false));
  one.fit(data, 2);
  const auto [d, worst] = worst_tensor_difference<models::ModelC>(w, values(one.parameters()));
  std::printf("accumulation: %d rank(s) x 2 x batch %zu vs 1 process x batch %zu: worst tensor %s differs by %.3g of "
              "its largest value (limit 1e-6)\n",
              world_size(), per_rank, global, worst.c_str(), d);
  return failed | !(d <= 1e-6);
}

/// Freezing across ranks: deterministic model B with its backbone frozen (layers 0-8) equals
/// ThreadedReplicas<4> bitwise, the backbone and its statistics stay as initialised on every
/// rank, and no gradient bucket holds a frozen tensor (nothing is sent for them).
int freeze() {
  const Bands data(128, 6);
  const std::size_t global = 32;
  const auto freeze_options = [&](std::size_t batch) {
    TrainerOptions o = options(batch, true);
    o.freeze = Freeze::below(9);
    return o;
  };
  const auto opt = [] { return Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-3}); };
  Trainer<models::ModelB, Sgd<>, ProcessGroupDDP<Mpi>> ddp(opt(), freeze_options(global / std::size_t(world_size())));
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_check", w);
  constexpr std::size_t backbone_end = models::ModelB::layout.param_base[9];
  for (const GradientBucket& k : ddp.engine().buckets())
    if (k.begin < backbone_end) {
      std::fprintf(stderr, "ddp_check: rank %d: bucket [%zu, %zu) holds frozen parameters (below %zu)\n", world_rank(),
                   k.begin, k.end, backbone_end);
      failed = 1;
    }
  Parameters<models::ModelB, float, Cpu> init;
  init.initialize(11);
  const auto b = ddp.parameters().buffers.span(), b0 = init.buffers.span();
  const bool kept = std::equal(w.begin(), w.begin() + backbone_end, init.values.begin()) &&
                    std::equal(b.begin(), b.end(), b0.begin());
  const bool moved = !std::equal(w.begin() + backbone_end, w.end(), init.values.begin() + backbone_end);
  if (world_rank() != 0) return failed | !kept | !moved;
  Trainer<models::ModelB, Sgd<>, ThreadedReplicas<4>> threads(opt(), freeze_options(global));
  threads.fit(data, 2);
  const bool same = values(threads.parameters()) == w;
  std::printf("freeze, %d rank(s): backbone and statistics %s, head %s, %s ThreadedReplicas<4>\n", world_size(),
              kept ? "kept" : "CHANGED", moved ? "trained" : "NOT TRAINED",
              same ? "bitwise equal to" : "DIFFERENT from");
  return failed | !kept | !moved | !same;
}

/// A U-Net with a class per pixel (tests/support/mask_bands.hpp: a third of the samples mostly
/// ignored, so ranks count different pixels), class weights, smoothing and a joint crop and flip:
/// deterministic DDP is bitwise ThreadedReplicas<4>'s at any world size, and every rank's
/// evaluation (pixel accuracy, mean IoU, loss) is the same as one process's.
int segment() {
  const MaskDataset<Shape<1, 8, 8>> data = test::mask_bands(48, 9);
  const std::size_t global = 16;
  const auto segment_options = [](std::size_t batch) {
    TrainerOptions o = options(batch, true);
    o.loss = {.label_smoothing = 0.05, .class_weights = {1.f, 2.f, 0.5f}};
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 1), JointRandomHorizontalFlip()};
    return o;
  };
  using Net = models::UNet<Shape<1, 8, 8>, 3, 4, 1>;
  Trainer<Net, Adam<>, ProcessGroupDDP<Mpi>> ddp(Adam({.lr = 1e-2}),
                                                 segment_options(global / std::size_t(world_size())));
  ddp.fit(data, 2);
  const EvalReport e = ddp.evaluate(data); // gives every rank rank 0's running statistics first
  auto w = values(ddp.parameters());
  const auto& b = ddp.parameters().buffers;
  w.insert(w.end(), b.data(), b.data() + b.size());
  int failed = check_identical("ddp_check", w);
  failed |= check_identical("ddp_check", std::vector<float>{float(e.accuracy), float(*e.mean_iou), float(e.loss)});
  if (world_rank() != 0) return failed;
  Trainer<Net, Adam<>, ThreadedReplicas<4>> threads(Adam({.lr = 1e-2}), segment_options(global));
  threads.fit(data, 2);
  auto v = values(threads.parameters());
  const auto& tb = threads.parameters().buffers;
  v.insert(v.end(), tb.data(), tb.data() + tb.size());
  const EvalReport t = threads.evaluate(data);
  const bool same = v == w;
  const bool same_eval =
      t.accuracy == e.accuracy && *t.mean_iou == *e.mean_iou && std::abs(t.loss - e.loss) <= 1e-12 * std::abs(t.loss);
  std::printf("segment, %d rank(s): weights and statistics %s ThreadedReplicas<4>; mean IoU %.6f vs %.6f, pixel "
              "accuracy %.4f%% vs %.4f%%, loss %.9f vs %.9f\n",
              world_size(), same ? "bitwise equal to" : "DIFFERENT from", *e.mean_iou, *t.mean_iou, e.accuracy,
              t.accuracy, e.loss, t.loss);
  return failed | !same | !same_eval;
}

/// A U-Net regressing two-channel target images (tests/support/noisy_bands.hpp) with HuberLoss
/// and a joint crop and flip: deterministic DDP is bitwise ThreadedReplicas<4>'s at any world
/// size, and every rank's evaluation loss is the same as one process's.
int regress() {
  const auto data = test::noisy_bands<2>(48, 9);
  const std::size_t global = 16;
  const auto regress_options = [](std::size_t batch) {
    TrainerOptions o = options(batch, true);
    o.regression = {.loss = RegressionLoss::huber, .delta = 0.3};
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 1), JointRandomHorizontalFlip()};
    return o;
  };
  using Net = models::UNet<Shape<1, 8, 8>, 2, 4, 1>;
  Trainer<Net, Adam<>, ProcessGroupDDP<Mpi>> ddp(Adam({.lr = 1e-2}),
                                                 regress_options(global / std::size_t(world_size())));
  ddp.fit(data, 2);
  const EvalReport e = ddp.evaluate(data);
  auto w = values(ddp.parameters());
  const auto& b = ddp.parameters().buffers;
  w.insert(w.end(), b.data(), b.data() + b.size());
  int failed = check_identical("ddp_check", w);
  failed |= check_identical("ddp_check", std::vector<float>{float(e.loss)});
  if (world_rank() != 0) return failed;
  Trainer<Net, Adam<>, ThreadedReplicas<4>> threads(Adam({.lr = 1e-2}), regress_options(global));
  threads.fit(data, 2);
  auto v = values(threads.parameters());
  const auto& tb = threads.parameters().buffers;
  v.insert(v.end(), tb.data(), tb.data() + tb.size());
  const EvalReport t = threads.evaluate(data);
  const bool same = v == w;
  const bool same_eval = std::abs(t.loss - e.loss) <= 1e-12 * std::abs(t.loss);
  std::printf("regress, %d rank(s): weights and statistics %s ThreadedReplicas<4>; Huber loss %.9f vs %.9f\n",
              world_size(), same ? "bitwise equal to" : "DIFFERENT from", e.loss, t.loss);
  return failed | !same | !same_eval;
}

/// The overflow decision is global: a rank whose gradients are finite still skips when another
/// rank's are not, so the ranks never diverge (the AMP+DDP failure this guards against).
int overflow() {
  const Bands data(64, 5);
  const std::size_t per_rank = 8, world = std::size_t(world_size()), rank = std::size_t(world_rank());
  EngineOptions o{.seed = 2};
  o.parallel.timeout_s = 60;
  detail::TrainEngine<ProcessGroupDDP<Mpi>, MixedPrecision<fp16>, models::ModelC, Adam<>> e(Adam({.lr = 1e-3}), o);
  const auto labels = [&](std::size_t first) { return std::span<const std::int32_t>(data.y.data() + first, per_rank); };
  const std::vector<float> before = values(e.parameters());
  std::vector<float> batch(data.image(rank * per_rank), data.image(rank * per_rank + per_rank));
  if (rank + 1 == world) batch[3 * 784 + 100] = 1e6f; // infinite in fp16: inf/NaN gradients here only
  e.step({batch.data(), per_rank}, labels(rank * per_rank), {});
  int failed = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) std::fprintf(stderr, "ddp_check: rank %zu: %s\n", rank, what);
    failed |= !ok;
  };
  expect(values(e.parameters()) == before, "the overflowing step changed the weights");
  expect(e.optimizer().steps() == 0, "the optimiser stepped on inf/NaN gradients");
  expect(e.skipped_steps() == 1, "the skipped step was not counted");
  expect(e.loss_scale() == 32768.0, "the loss scale did not halve (65536 -> 32768)");
  const std::size_t next = world * per_rank + rank * per_rank;
  e.step({data.image(next), per_rank}, labels(next), {.step = 1, .forward_pass = 1});
  expect(e.optimizer().steps() == 1, "the clean step after the overflow was not taken");
  expect(values(e.parameters()) != before, "the clean step did not change the weights");
  failed |= check_identical("ddp_check", values(e.parameters()));
  if (world_rank() == 0 && !failed)
    std::printf("overflow on rank %zu of %zu: every rank skipped the step, scale %g, then stepped together\n",
                world - 1, world, e.loss_scale());
  return failed;
}

} // namespace

int main(int argc, char** argv) {
  MpiSession mpi(argc, argv);
  Args a;
  double limit = 0;
  if (argc > 1) a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--deterministic") a.deterministic = true;
    if (s == "--per-rank") a.per_rank = true;
    if (s == "--out" && i + 1 < argc) a.out = argv[++i];
    if (s == "--save" && i + 1 < argc) a.save = argv[++i];
    if (s == "--resume" && i + 1 < argc) a.resume = argv[++i];
    if (s == "--bucket-kib" && i + 1 < argc) bucket_kib = std::stoul(argv[++i]);
    if (s == "--augment") augment = true;
    if (s == "--compress" && i + 1 < argc) compression = parse_compression(argv[++i]);
    if (s == "--error-feedback") error_feedback = true;
    if (s == "--rank1-compress" && i + 1 < argc && world_rank() == 1) compression = parse_compression(argv[++i]);
    if (s == "--limit" && i + 1 < argc) limit = std::stod(argv[++i]);
    if (s == "--signal" && i + 1 < argc) a.fault.signal = argv[++i];
    if (s == "--at" && i + 1 < argc) a.fault.at = argv[++i];
    if (s == "--at-step" && i + 1 < argc) a.fault.step = std::stoll(argv[++i]);
    if (s == "--stamp" && i + 1 < argc) a.fault.stamp = argv[++i];
    if (s == "--rank2-timeout" && i + 1 < argc) a.rank2_timeout = std::stod(argv[++i]);
  }
  try {
    if (a.mode == "equivalence") return equivalence(a);
    if (a.mode == "resume") return resume(a);
    if (a.mode == "recipe") return recipe(a);
    if (a.mode == "mismatch") return mismatch();
    if (a.mode == "resnet") return resnet();
    if (a.mode == "fault") return fault(a);
    if (a.mode == "accumulate") return accumulate();
    if (a.mode == "freeze") return freeze();
    if (a.mode == "segment") return segment();
    if (a.mode == "regress") return regress();
    if (a.mode == "placement") return placement();
    if (a.mode == "shard") return shard();
    if (a.mode == "linkcut") return linkcut(a);
    if (a.mode == "compressed") return compressed(a, limit);
    if (a.mode == "overflow") return overflow();
    std::fprintf(stderr, "ddp_check: unknown mode \"%s\"\n", a.mode.c_str());
    return 2;
  } catch (const Error& e) {
    test::report_fault(a.fault, "ddp_check", e);
    return 3;
  }
}
