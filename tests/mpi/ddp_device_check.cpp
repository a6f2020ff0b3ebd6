// ProcessGroupDDP<Mpi, ThrustDevice> under mpirun: the device DDP engine
// (train/engine/process_group_ddp_on_device.hpp) with the device kernels on Thrust's OpenMP
// system, what ProcessGroupDDP<Nccl, Cuda> runs with NCCL in place of MPI for the gradients.
//
//   mpirun -np N ddp_device_check equivalence
//       model C, 2 epochs of 128 synthetic samples, global batch 32: every rank holds the same
//       weights, and rank 0's match one process (SingleDevice<ThrustDevice>, batch 32) within 1e-5;
//       per-layer gradient buckets (bucket_kib 1, all-reduced while backward runs) give the same
//       weights bitwise as one bucket
//   mpirun -np N ddp_device_check resume
//       model B (BatchNorm, SGD momentum): 5 steps, a checkpoint, a fresh trainer built with
//       another seed resumes (at step 5, epoch 1: checked) and trains to 12; the weights equal a
//       straight 12-step run bitwise, on every rank
//   mpirun -np 3 --enable-recovery ddp_device_check fault --signal stop|kill --at TEXT [--at-step N] --stamp FILE
//       as ddp_check's fault cases, on the device engine: rank 1 stops or dies inside a
//       collective, every survivor fails with cohort's message naming it
//   mpirun -np N ddp_device_check mixed
//       MixedPrecision<fp16> (model C, Adam): every rank holds the same weights, loss scale and
//       skipped-step count; an overflow in the last rank's batch alone skips the step on every
//       rank; rank 0's weights match one process's fp16 training on the global batch within 1e-3
//   mpirun -np N ddp_device_check compressed --compress bf16|fp16 [--error-feedback] --limit L
//       the ranks' compressed all-reduce (RankAllReduce<Mpi, ThrustDevice>) on known gradients:
//       with 2 ranks each sum is the CPU engine's (both packed, added, rounded), bit for bit, and
//       the residual is the host's; then model C, 2 epochs, global batch 32 with compressed
//       buckets: every rank holds the same weights, within L of one float device process per
//       tensor and not equal to it
//   mpirun -np 3 --enable-recovery ddp_device_check fault ... --compress bf16: the fault cases
//       with compressed buckets; equivalence --rank1-compress bf16: rank 1 alone compresses
//   mpirun -np N ddp_device_check segment
//       a GroupNorm U-Net on masks (tests/support/mask_bands.hpp: ranks count different numbers of
//       ignored pixels), class weights and smoothing, global batch 16: every rank holds the same
//       weights and evaluates the same pixel accuracy, mean IoU and loss, and rank 0's weights
//       match one device process's on the global batch within 1e-5 per tensor
//   mpirun -np 3 ddp_device_check device_setup [--visible V] [--visible-rank1 V1]
//       ProcessGroupDDP's device set-up (parallel/device_assignment.hpp) on the instrumented
//       device of support/instrumented_device.hpp, each rank seeing V GPUs (rank 1: V1): trains
//       when every rank finds its own, else every rank fails naming the rank and the reason
//
// Exit status: 0 on success, 1 on a failed check, 3 when a cohort::Error was thrown.

#include <cohort/backend/thrust_device.hpp>
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/models/unet.hpp>
#include <cohort/mpi.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mpi/ddp_support.hpp"
#include "support/awkward_gradients.hpp"
#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/instrumented_device.hpp"
#include "support/mask_bands.hpp"

using namespace cohort;
using test::Bands;
using test::check_identical;
using test::values;
using test::world_rank;
using test::world_size;
using test::worst_tensor_difference;

namespace {

GradientCompression compression = GradientCompression::none; // --compress
bool error_feedback = false;                                 // --error-feedback

TrainerOptions options(std::size_t batch, std::uint64_t max_steps = 0, std::size_t bucket_kib = 1u << 20,
                       double timeout_s = 60) {
  TrainerOptions o{.batch_size = batch, .seed = 11, .max_steps = max_steps, .log = nullptr};
  o.parallel.timeout_s = timeout_s;
  o.parallel.bucket_kib = bucket_kib; // default: one bucket holds the whole store
  o.parallel.compression = compression;
  o.parallel.error_feedback = error_feedback;
  return o;
}

int equivalence() {
  const Bands data(128, 1);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size());
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi, ThrustDevice>> ddp(sgd, options(per_rank));
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_device_check", w);
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi, ThrustDevice>> per_layer(sgd, options(per_rank, 0, 1));
  per_layer.fit(data, 2);
  if (values(per_layer.parameters()) != w) {
    std::fprintf(stderr, "ddp_device_check: rank %d: per-layer buckets give different weights\n", world_rank());
    failed = 1;
  }
  if (world_rank() != 0) return failed;
  std::printf("%d device rank(s): %zu gradient buckets at 1 KiB, weights bitwise equal to one bucket: %s\n",
              world_size(), plan_buckets<models::ModelC>(1024).size(), failed ? "no" : "yes");
  Trainer<models::ModelC, Sgd<>, SingleDevice<ThrustDevice>> one(sgd, options(global));
  one.fit(data, 2);
  const auto [d, worst] = worst_tensor_difference<models::ModelC>(w, values(one.parameters()));
  std::printf("%d device rank(s) x batch %zu vs 1 device x batch %zu: worst tensor %s differs by %.3g of its largest "
              "value (limit 1e-5)\n",
              world_size(), per_rank, global, worst.c_str(), d);
  return failed | !(d <= 1e-5);
}

int resume() {
  const Bands data(100, 1);
  const std::size_t per_rank = 24 / std::size_t(world_size());
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  using T = Trainer<models::ModelB, Sgd<>, ProcessGroupDDP<Mpi, ThrustDevice>>;
  const auto path = std::filesystem::temp_directory_path() / "cohort_ddp_device_half.safetensors";
  std::vector<float> straight, resumed;
  {
    T t(sgd, options(per_rank, 12));
    t.fit(data, 10);
    straight = values(t.parameters());
  }
  {
    T t(sgd, options(per_rank, 5));
    t.fit(data, 10);
    t.save(path);
  }
  {
    TrainerOptions o = options(per_rank, 12);
    o.seed = 12; // other initial weights and shuffling: the checkpoint's must replace them
    T t(sgd, o);
    t.resume(path);
    if (t.step() != 5 || t.epoch() != 1 || t.seed() != 11) { // 100 samples, global batch 24: 5 steps
      std::fprintf(stderr,
                   "ddp_device_check: rank %d: resumed at step %llu, epoch %llu, seed %llu (expected 5, 1, 11)\n",
                   world_rank(), static_cast<unsigned long long>(t.step()), static_cast<unsigned long long>(t.epoch()),
                   static_cast<unsigned long long>(t.seed()));
      return 1;
    }
    t.fit(data, 10);
    resumed = values(t.parameters());
  }
  int failed = check_identical("ddp_device_check", resumed);
  const bool same = straight == resumed;
  if (!same) std::fprintf(stderr, "ddp_device_check: rank %d: the resumed weights differ\n", world_rank());
  if (world_rank() == 0) {
    std::filesystem::remove(path);
    std::printf("%d device rank(s): resumed run %s the straight one\n", world_size(),
                same ? "bitwise equal to" : "DIFFERENT from");
  }
  return failed | !same;
}

/// A dense network on the device engine: each rank divides its shard's per-pixel loss by the
/// weight total of every rank's counted pixels, so the ranks' gradients add up to the global
/// batch's mean (GroupNorm: no shard statistics, so one process on the whole batch computes the
/// same step).
int segment() {
  const MaskDataset<Shape<1, 8, 8>> data = test::mask_bands(48, 9);
  const std::size_t global = 16, per_rank = global / std::size_t(world_size());
  const auto segment_options = [](std::size_t batch) {
    TrainerOptions o = options(batch);
    o.loss = {.label_smoothing = 0.05, .class_weights = {1.f, 2.f, 0.5f}};
    return o;
  };
  using Net = models::UNet<Shape<1, 8, 8>, 3, 4, 1, models::UNetUpsampling::bilinear, models::UNetNorm::group>;
  Trainer<Net, Adam<>, ProcessGroupDDP<Mpi, ThrustDevice>> ddp(Adam({.lr = 1e-2}), segment_options(per_rank));
  ddp.fit(data, 2);
  const EvalReport e = ddp.evaluate(data);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_device_check", w);
  failed |=
      check_identical("ddp_device_check", std::vector<float>{float(e.accuracy), float(*e.mean_iou), float(e.loss)});
  if (world_rank() != 0) return failed;
  Trainer<Net, Adam<>, SingleDevice<ThrustDevice>> one(Adam({.lr = 1e-2}), segment_options(global));
  one.fit(data, 2);
  const EvalReport t = one.evaluate(data);
  const auto [worst, tensor] = worst_tensor_difference<Net>(w, values(one.parameters()));
  const bool close = worst <= 1e-5; // sums in another order: measured 4.6e-7 (2 ranks), 3.9e-7 (4)
  const bool same_eval = std::abs(t.accuracy - e.accuracy) <= 1e-9 && std::abs(*t.mean_iou - *e.mean_iou) <= 1e-9 &&
                         std::abs(t.loss - e.loss) <= 1e-6 * std::abs(t.loss);
  std::printf("segment, %d rank(s): weights within %.3g of one device process (worst: %s); mean IoU %.6f vs %.6f, "
              "pixel accuracy %.4f%% vs %.4f%%, loss %.9f vs %.9f\n",
              world_size(), worst, tensor.c_str(), *e.mean_iou, *t.mean_iou, e.accuracy, t.accuracy, e.loss, t.loss);
  return failed | !close | !same_eval;
}

int mixed() {
  const Bands data(128, 1);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size());
  const Adam<> adam({.lr = 1e-3});
  TrainerOptions o = options(per_rank);
  o.loss_scale.growth_interval = 2; // the scale moves: all ranks must move it together
  using M = MixedPrecision<fp16>;
  Trainer<models::ModelC, Adam<>, ProcessGroupDDP<Mpi, ThrustDevice>, M> ddp(adam, o);
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  int failed = check_identical("ddp_device_check", w);
  auto& e = ddp.engine();
  failed |= check_identical("ddp_device_check", {float(e.loss_scale()), float(e.skipped_steps())});
  // An overflow in one rank's batch only: every rank must skip the step.
  const std::size_t skipped = e.skipped_steps();
  std::vector<float> batch(data.x.begin(), data.x.begin() + std::ptrdiff_t(per_rank * 784));
  if (world_rank() == world_size() - 1) batch[7] = 1e6f; // infinite in fp16
  e.step({batch.data(), per_rank}, std::span<const std::int32_t>(data.y.data(), per_rank), {.step = 1000});
  if (e.skipped_steps() != skipped + 1 || values(ddp.parameters()) != w) {
    std::fprintf(stderr, "ddp_device_check: rank %d did not skip the overflowing step\n", world_rank());
    failed = 1;
  }
  if (world_rank() != 0) return failed;
  TrainerOptions g = o;
  g.batch_size = global;
  Trainer<models::ModelC, Adam<>, SingleDevice<ThrustDevice>, M> one(adam, g);
  one.fit(data, 2);
  const auto [d, worst] = worst_tensor_difference<models::ModelC>(w, values(one.parameters()));
  std::printf("%d device rank(s) in fp16 (loss scale %g, %zu steps skipped) vs 1 device: worst tensor %s "
              "differs by %.3g of its largest value (limit 1e-3)\n",
              world_size(), e.loss_scale(), skipped, worst.c_str(), d);
  return failed | !(d <= 1e-3);
}

/// The compressed all-reduce on known gradients (rank r's: awkward_gradients(seed + r)), two
/// steps; with 2 ranks the sums are the CPU engine's reduction of the two packed values.
int compressed_sums() {
  using Reduce = device::RankAllReduce<Mpi, ThrustDevice>;
  constexpr std::size_t n = 3000;
  const int rank = world_rank(), world = world_size();
  MpiCommunicator comm(60);
  ThrustDevice::context ctx{};
  Reduce reduce(comm, ctx,
                {{.begin = 1000, .end = 3000, .first_layer = 2}, {.begin = 0, .end = 1000, .first_layer = 0}},
                {.format = compression, .error_feedback = error_feedback});
  std::vector<std::vector<float>> residual(std::size_t(world), std::vector<float>(n, 0.f));
  int failed = 0;
  for (std::uint32_t step = 0; step < 2; ++step) {
    std::vector<std::vector<std::uint16_t>> wire(static_cast<std::size_t>(world), std::vector<std::uint16_t>(n));
    for (int p = 0; p < world; ++p) { // every rank's packing, as the host does it
      const auto g = test::awkward_gradients(n, 100 * step + std::uint32_t(p));
      detail::pack_gradients(compression, g.data(), wire[std::size_t(p)].data(), n,
                             error_feedback ? residual[std::size_t(p)].data() : nullptr);
    }
    const auto mine = test::awkward_gradients(n, 100 * step + std::uint32_t(rank));
    DeviceBuffer<float> grads;
    grads.assign_from_host(mine.data(), n);
    reduce.begin(grads.data());
    reduce.start(comm, ctx, 0);
    reduce.start(comm, ctx, 1);
    reduce.finish(comm, ctx);
    const std::vector<float> got = grads.to_host();
    std::vector<float> everyone(got.size() * std::size_t(world));
    MPI_Allgather(got.data(), int(n), MPI_FLOAT, everyone.data(), int(n), MPI_FLOAT, MPI_COMM_WORLD);
    bool same = true; // bits: fp16 sums of +inf and -inf are NaN
    for (int p = 0; p < world; ++p)
      same &= std::memcmp(everyone.data() + std::size_t(p) * n, got.data(), n * sizeof(float)) == 0;
    if (!same) {
      std::fprintf(stderr, "ddp_device_check: rank %d: step %u: the ranks' compressed sums differ\n", rank, step);
      failed = 1;
    }
    if (error_feedback && reduce.residual() != residual[std::size_t(rank)]) {
      std::fprintf(stderr, "ddp_device_check: rank %d: step %u: the residual is not the host's\n", rank, step);
      failed = 1;
    }
    if (world == 2) {
      std::vector<std::uint16_t> sum(wire[1]);
      detail::add_packed(compression, wire[0].data(), sum.data(), n);
      std::vector<float> expected(n);
      detail::unpack_gradients(compression, sum.data(), expected.data(), n);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&got[i], &expected[i], sizeof(float)) != 0;
      if (differ) {
        std::fprintf(stderr, "ddp_device_check: rank %d: step %u: %zu of %zu sums differ from the CPU engine's\n", rank,
                     step, differ, n);
        failed = 1;
      }
    }
  }
  if (rank == 0)
    std::printf("%s%s, %d device rank(s): known sums %s\n", std::string(compression_name(compression)).c_str(),
                error_feedback ? " with error feedback" : "", world,
                failed       ? "WRONG"
                : world == 2 ? "bitwise the CPU engine's"
                             : "the same on every rank");
  return failed;
}

/// Model C, 2 epochs, global batch 32 with compressed buckets: every rank alike, within `limit`
/// of one float device process per tensor, and not equal to it (the rounding happened).
int compressed(double limit) {
  int failed = compressed_sums();
  const Bands data(128, 1);
  const std::size_t global = 32, per_rank = global / std::size_t(world_size());
  const Sgd<> sgd({.lr = 0.05, .momentum = 0.9});
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi, ThrustDevice>> ddp(sgd, options(per_rank, 0, 4));
  ddp.fit(data, 2);
  const auto w = values(ddp.parameters());
  failed |= check_identical("ddp_device_check", w);
  if (world_rank() != 0) return failed;
  const GradientCompression saved = compression;
  const bool saved_feedback = error_feedback;
  compression = GradientCompression::none, error_feedback = false;
  Trainer<models::ModelC, Sgd<>, SingleDevice<ThrustDevice>> one(sgd, options(global));
  compression = saved, error_feedback = saved_feedback;
  one.fit(data, 2);
  const auto [d, worst] = worst_tensor_difference<models::ModelC>(w, values(one.parameters()));
  std::printf("%s%s, %d device rank(s): worst tensor %s differs from one float device process by %.3g of its largest "
              "value (limit %.3g)\n",
              std::string(compression_name(compression)).c_str(), error_feedback ? " with error feedback" : "",
              world_size(), worst.c_str(), d, limit);
  return failed | !(d <= limit) | (d == 0);
}

/// ddp_check's fault cases on the device engine: rank 1 stops or dies inside the collective
/// `f` names; the survivors must fail within the deadline (3 s), naming it.
int fault(const test::Fault& f, const std::string& save) {
  test::arm(f, "ddp_device_check");
  const Bands data(72, 3), test(30, 4); // 3 ranks x batch 8: 3 steps per epoch
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi, ThrustDevice>> t(Sgd({.lr = 0.05, .momentum = 0.9}),
                                                                       options(8, 0, 1u << 20, 3.0));
  t.fit(data, 2, &test);
  t.save(save);
  std::fprintf(stderr, "ddp_device_check: rank %d: training went on without rank 1\n", world_rank());
  return 1;
}

/// ProcessGroupDDP's device set-up on the instrumented device (support/instrumented_device.hpp),
/// every rank on one host seeing `visible` GPUs (rank 1 seeing `visible_rank1`): a rank that
/// cannot pick a device makes every rank fail naming it, two ranks on one device are refused,
/// and a node's GPUs shared out one per rank train.
int device_setup(int visible, int visible_rank1) {
  test::DeviceLog::get().visible = world_rank() == 1 ? visible_rank1 : visible;
  const Bands data(48, 3);
  Trainer<models::ModelC, Sgd<>, ProcessGroupDDP<Mpi, test::InstrumentedDevice>> t(Sgd({.lr = 0.05}),
                                                                                   options(8, 0, 1u << 20, 10.0));
  t.fit(data, 1);
  std::printf("ddp_device_check: rank %d trained; kernels on a wrong device: %zu\n", world_rank(),
              test::DeviceLog::get().wrong_device_launches.load());
  return test::DeviceLog::get().wrong_device_launches.load() == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  MpiSession mpi(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  test::Fault f;
  std::string save;
  int visible = 8, visible_rank1 = -2;
  double limit = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--error-feedback") {
      error_feedback = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (s == "--compress")
      compression = parse_compression(argv[++i]);
    else if (s == "--rank1-compress") { // rank 1 alone: the ranks must refuse to train together
      const GradientCompression c = parse_compression(argv[++i]);
      if (world_rank() == 1) compression = c;
    } else if (s == "--limit")
      limit = std::stod(argv[++i]);
    else if (s == "--signal")
      f.signal = argv[++i];
    else if (s == "--at")
      f.at = argv[++i];
    else if (s == "--at-step")
      f.step = std::stoll(argv[++i]);
    else if (s == "--stamp")
      f.stamp = argv[++i];
    else if (s == "--save")
      save = argv[++i];
    else if (s == "--visible")
      visible = std::stoi(argv[++i]);
    else if (s == "--visible-rank1")
      visible_rank1 = std::stoi(argv[++i]);
  }
  try {
    if (mode == "equivalence") return equivalence();
    if (mode == "resume") return resume();
    if (mode == "mixed") return mixed();
    if (mode == "segment") return segment();
    if (mode == "fault") return fault(f, save);
    if (mode == "compressed") return compressed(limit);
    if (mode == "device_setup") return device_setup(visible, visible_rank1 == -2 ? visible : visible_rank1);
    std::fprintf(stderr, "ddp_device_check: unknown mode \"%s\"\n", mode.c_str());
    return 2;
  } catch (const Error& e) {
    test::report_fault(f, "ddp_device_check", e);
    return 3;
  }
}
