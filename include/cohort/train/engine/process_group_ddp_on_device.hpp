#pragma once
/// \file
/// The engine of `ProcessGroupDDP<Comm, B>` for a device backend B: one process per device
/// (Horovod's pattern). MPI is the control plane for every Comm: the ranks agree on the network,
/// take rank 0's parameters, share checkpoints and evaluation counts, and fail together with
/// the missing rank named. The gradients travel over `Comm`:
///
///     ProcessGroupDDP<Nccl, Cuda>       ncclAllReduce on the GPUs (cohort/parallel/nccl.cuh; the
///                                       NCCL unique id is broadcast over MPI)
///     ProcessGroupDDP<Mpi, ThrustDevice> MPI over host copies (the CPU build of the same engine,
///                                       what CI runs under mpirun)
///
/// Each gradient bucket (`options.parallel.bucket_kib`) is all-reduced as soon as backward has
/// produced it, overlapping the rest of backward (on NCCL: on a communication stream of the GPU).
/// The device is `options.parallel.device` + the rank's local rank on its node (MPI's shared-
/// memory split), as seed 002's `rank = node * gpus + local_rank`. Under MixedPrecision each rank
/// computes with its 16-bit copy and checks the same summed gradients (all skip together).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/device_assignment.hpp"
#include "cohort/parallel/gradient_buckets.hpp"
#include "cohort/parallel/gradient_compression.hpp"
#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/parallel/process_group_ddp.hpp"
#include "cohort/parallel/signature.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/error_feedback_exchange.hpp"
#include "cohort/train/engine/process_group_ddp.hpp"

namespace cohort::device {
/// How the ranks of ProcessGroupDDP<Comm, Backend> sum their gradients, bucket by bucket while
/// backward still runs (each call on the rank's one thread):
///
///     reduce.begin(grads);              // before the step's last backward
///     reduce.start(comm, ctx, b);       // backward finished bucket b (buckets in order 0, 1, ...)
///     reduce.finish(comm, ctx);         // kernels queued on ctx from now on see every sum
///
/// This primary template serves Comm = Mpi: each bucket is copied to the host and summed in
/// double by a non-blocking MPI_Iallreduce (on a communicator of its own) while backward goes
/// on; finish() waits for them and copies the sums back. With compression the bucket is packed
/// to 16 bits on the device first (half the bytes to copy and send), summed by the CPU engine's
/// MPI reduction (every partial sum rounded) and widened on the device. cohort/parallel/nccl.cuh
/// specialises it for <Nccl, Cuda>.
template <class Comm, class Backend>
class RankAllReduce {
  static_assert(std::is_same_v<Comm, Mpi>,
                "ProcessGroupDDP<Nccl, Cuda>: #include <cohort/parallel/nccl.cuh> and link the cohort::nccl CMake "
                "target");
  using K = ops::ElementwiseKernels<Backend>;

 public:
  RankAllReduce(MpiCommunicator& comm, typename Backend::context&, std::vector<GradientBucket> buckets,
                const BucketCompression& compression = {})
      : buckets_(std::move(buckets)), requests_(buckets_.size(), MPI_REQUEST_NULL), comm_(comm.duplicate()),
        compression_(compression.format) {
    std::size_t n = 0;
    for (const GradientBucket& k : buckets_) {
      if (k.size() > std::size_t(std::numeric_limits<int>::max()))
        throw ValueError(cohort::detail::concat("ProcessGroupDDP: gradient bucket of layers ", k.first_layer,
                                                "+ holds ", k.size(),
                                                " values, more than one MPI message takes; lower bucket_kib"));
      n = std::max(n, k.end);
    }
    if (compressed()) {
      wire_.resize(n);
      host16_.resize(n);
      if (compression.error_feedback) residual_.resize(n); // zeroed
    } else {
      host_.resize(n);
      sums_.resize(n);
    }
  }
  RankAllReduce(const RankAllReduce&) = delete;
  RankAllReduce& operator=(const RankAllReduce&) = delete;
  ~RankAllReduce() { MpiCommunicator::release(comm_); }

  void begin(float* grads) noexcept { grads_ = grads, next_ = 0; }
  void start(MpiCommunicator& comm, typename Backend::context& ctx, std::size_t b) {
    if (b != next_)
      throw DistributedError(
          cohort::detail::concat("rank ", comm.rank(), ": gradient bucket ", b, " started before bucket ", next_));
    const GradientBucket& k = buckets_[b];
    if (compressed()) {
      K::pack_gradients(ctx, compression_, grads_ + k.begin, wire_.data() + k.begin, k.size(),
                        residual_.size() ? residual_.data() + k.begin : nullptr);
      K::download(ctx, wire_.data() + k.begin, host16_.data() + k.begin, k.size());
      comm.check(MPI_Iallreduce(MPI_IN_PLACE, host16_.data() + k.begin, int(k.size()), MPI_UINT16_T,
                                cohort::detail::compressed_sum_op(compression_), comm_, &requests_[b]),
                 "MPI_Iallreduce", bucket_name(b));
    } else {
      K::download(ctx, grads_ + k.begin, host_.data() + k.begin, k.size());
      for (std::size_t i = k.begin; i < k.end; ++i) sums_[i] = host_[i];
      comm.check(MPI_Iallreduce(MPI_IN_PLACE, sums_.data() + k.begin, int(k.size()), MPI_DOUBLE, MPI_SUM, comm_,
                                &requests_[b]),
                 "MPI_Iallreduce", bucket_name(b));
    }
    comm.started(bucket_name(b));
    ++next_;
    progress(comm);
  }
  /// Starts the buckets backward did not, waits for every sum and copies them to the device.
  void finish(MpiCommunicator& comm, typename Backend::context& ctx) {
    while (next_ < buckets_.size()) start(comm, ctx, next_);
    for (std::size_t b = 0; b < buckets_.size(); ++b) comm.wait(requests_[b], bucket_name(b));
    for (const GradientBucket& k : buckets_) {
      if (compressed()) {
        K::upload(ctx, host16_.data() + k.begin, wire_.data() + k.begin, k.size());
        K::unpack_gradients(ctx, compression_, wire_.data() + k.begin, grads_ + k.begin, k.size());
      } else {
        for (std::size_t i = k.begin; i < k.end; ++i) host_[i] = float(sums_[i]);
        K::upload(ctx, host_.data() + k.begin, grads_ + k.begin, k.size());
      }
    }
  }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }
  /// Error feedback: what rounding has dropped so far (empty without it), and its replacement
  /// (a checkpoint's).
  std::vector<float> residual() const { return residual_.to_host(); }
  void set_residual(const std::vector<float>& r) { residual_.assign_from_host(r.data(), r.size()); }

 private:
  bool compressed() const noexcept { return compression_ != GradientCompression::none; }
  /// Lets MPI move the reductions in flight along (most MPI libraries progress non-blocking
  /// collectives only inside MPI calls).
  void progress(MpiCommunicator& comm) {
    for (std::size_t b = 0; b < next_; ++b) {
      int done = 0;
      if (requests_[b] != MPI_REQUEST_NULL)
        comm.check(MPI_Test(&requests_[b], &done, MPI_STATUS_IGNORE), "MPI_Test", bucket_name(b));
    }
  }
  std::string bucket_name(std::size_t b) const {
    return cohort::detail::concat("the all-reduce of gradient bucket ", b, " (layers ", buckets_[b].first_layer, "+, ",
                                  buckets_[b].size(), " values", compressed() ? ", " : "",
                                  compressed() ? compression_name(compression_) : "", ")");
  }

  std::vector<GradientBucket> buckets_;
  std::vector<MPI_Request> requests_;
  MPI_Comm comm_; // the buckets' own: never ordered against the control plane's collectives
  GradientCompression compression_;
  std::vector<float> host_;
  std::vector<double> sums_;
  typename Backend::template buffer<std::uint16_t> wire_; // compressed: the packed buckets on the device
  std::vector<std::uint16_t> host16_;                     // ... on the host, summed in place by MPI
  typename Backend::template buffer<float> residual_;     // error feedback, on the device
  float* grads_ = nullptr;
  std::size_t next_ = 0;
};
} // namespace cohort::device

namespace cohort::detail {

template <class Comm, class Backend, class Precision, class Net, class Opt>
requires(!host_memory_backend<Backend> &&
         known_precision<Precision>) class TrainEngine<ProcessGroupDDP<Comm, Backend>, Precision, Net, Opt>
    : public DeviceEngineBase<TrainEngine<ProcessGroupDDP<Comm, Backend>, Precision, Net, Opt>, Net, Opt> {
  using base = DeviceEngineBase<TrainEngine, Net, Opt>;
  friend base;
  using context = typename Backend::context;

 public:
  static constexpr bool distributed = true;
  using typename base::params_type;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : base(std::move(opt), o.seed), seed_(o.seed), comm_(o.parallel.timeout_s) {
    rank_ = std::size_t(comm_.rank());
    world_ = std::size_t(comm_.size());
    check_launch_environment(comm_);
    if (o.parallel.deterministic)
      throw ValueError("ProcessGroupDDP on a device backend: deterministic mode is not implemented");
    agree_across_ranks(
        comm_, ddp_agreement_lines<Net, Precision>(concat("ProcessGroupDDP<", Comm::name, ", ", Backend::name, ">"),
                                                   this->opt_, o.parallel, o.agreement));
    set_up_device(o);
    if (o.parallel.bucket_kib == 0) throw ValueError("ProcessGroupDDP: bucket_kib must be at least 1");
    reduce_ = std::make_unique<device::RankAllReduce<Comm, Backend>>(
        comm_, dev_->ctx(), plan_buckets<Net>(o.parallel.bucket_kib * 1024, o.frozen),
        BucketCompression{.format = o.parallel.compression, .error_feedback = o.parallel.error_feedback});
    bucket_of_layer_ = bucket_of_layer<Net>(reduce_->buckets());
    broadcast_model("rank 0's initial parameters");
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    if (m.index == 0) comm_.begin_step(m.step);
    // The ranks' gradients are summed: each scales its mean by 1 / world (and by the micro-batch
    // share under accumulation), as the CPU engine does.
    // With class weights every rank divides by the weight total of all ranks' labels instead.
    const double total = step_weight_total<classes_of<Net>>(dev_->loss(), labels, *this);
    const double per_world = total > 0 ? double(world_) : 1.0; // the loss as a local mean
    const StepInfo info = train_step_info(seed_, m, rank_, world_, rank_ == 0);
    const double scale = 1.0 / ((total > 0 ? 1.0 : double(world_)) * double(m.count));
    if (!m.last()) return per_world * dev_->train(info, x, labels, scale, m.index > 0, NoHook{}, total);
    // The last micro-batch: each bucket's all-reduce starts as backward completes it.
    reduce_->begin(dev_->gradients());
    const double local = per_world * dev_->train(
                                         info, x, labels, scale, m.index > 0,
                                         [&](std::size_t layer) {
                                           if (const std::size_t b = bucket_of_layer_[layer]; b != no_bucket)
                                             reduce_->start(comm_, dev_->ctx(), b);
                                         },
                                         total);
    reduce_->finish(comm_, dev_->ctx());
    double loss = local / double(world_);
    comm_.allreduce_sum(&loss, 1, "the all-reduce of the loss");
    dev_->step();
    this->mark_trained();
    return loss;
  }

  /// (correct predictions, summed loss) over this rank's share of an evaluation batch (a dense
  /// network's predictions added to `metrics`; the Trainer sums the counts over ranks).
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    return dev_->evaluate(x, labels, seed_, metrics);
  }

  std::size_t rank() const noexcept { return rank_; }
  std::size_t world() const noexcept { return world_; }
  std::size_t devices() const noexcept { return world_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  MpiCommunicator& communicator() noexcept { return comm_; }

  void barrier(const char* what) { comm_.barrier(what); }
  void sum(std::span<double> values, const char* what) {
    comm_.allreduce_sum(values.data(), values.size(), concat("the all-reduce of ", what));
  }
  /// Rank 0's running statistics and counters to every rank.
  void sync_buffers() {
    this->download();
    broadcast_buffers(comm_, this->host_);
    dev_->load_parameters(this->host_);
  }
  /// Rank 0's error (if any), else its trainer state, parameters and optimiser state.
  template <class State>
  void share_from_root(std::string& error, State& state) {
    if (share_root_outcome(comm_, error, state)) broadcast_model("rank 0's checkpoint");
  }
  /// Error feedback's residuals at rank 0 for a checkpoint, and back from one (collectives).
  ErrorFeedbackState gather_error_feedback() {
    return cohort::detail::gather_error_feedback(comm_, reduce_->residual(), 1, false);
  }
  void scatter_error_feedback(const ErrorFeedbackState& s) {
    std::vector<float> r = reduce_->residual();
    cohort::detail::scatter_error_feedback(comm_, s, r, 1, false);
    if (!r.empty()) reduce_->set_residual(r);
  }

 private:
  DeviceReplica<Net, Backend, Opt, Precision>& first_replica() noexcept { return *dev_; }
  template <class F>
  void for_each_replica(F&& f) {
    f(*dev_);
  }
  /// This rank's device (parallel/device_assignment.hpp) and replica on it; then every rank
  /// learns whether all succeeded and whether two ranks of a node hold the same device, so a
  /// rank that cannot start makes all of them fail here, naming it, instead of leaving them in
  /// the communicator's set-up.
  void set_up_device(const EngineOptions& o) {
    std::exception_ptr error;
    std::string report;
    try {
      int device = o.parallel.device;
      if constexpr (requires(context c) { c.device; }) {
        int visible = -1;
        if constexpr (requires { context::visible_devices(); }) visible = context::visible_devices();
        device = rank_device({.first = o.parallel.device,
                              .local_rank = comm_.local_rank(),
                              .local_size = comm_.local_size(),
                              .visible = visible,
                              .rank = comm_.rank(),
                              .host = comm_.host()});
      }
      context ctx = device_context<context>(device, o.parallel);
      dev_ = std::make_unique<DeviceReplica<Net, Backend, Opt, Precision>>(this->opt_, ctx, o.loss_scale, o.loss,
                                                                           o.frozen, o.eval_chunk, o.ignore_index);
      report = concat("ok ", comm_.host(), " ", device);
      if constexpr (requires { ctx.identity(); }) report = concat("ok ", comm_.host(), " ", ctx.identity());
    } catch (const std::exception& e) {
      error = std::current_exception();
      report = concat("failed ", e.what());
    }
    const auto reports = comm_.allgather_text(report, "the ranks' device set-up");
    std::string failed;
    for (std::size_t p = 0; p < reports.size(); ++p)
      if (reports[p].rfind("failed ", 0) == 0) failed += concat("\n  rank ", p, ": ", reports[p].substr(7));
    if (error) std::rethrow_exception(error); // this rank's own error, with its type
    if (!failed.empty())
      throw DistributedError(concat("rank ", rank_, " of ", world_, ": ranks failed to set up their device:", failed));
    if constexpr (requires(context c) { c.device; })
      for (std::size_t p = 0; p < reports.size(); ++p)
        for (std::size_t q = p + 1; q < reports.size(); ++q)
          if (reports[p] == reports[q])
            throw DistributedError(concat("rank ", rank_, " of ", world_, ": ranks ", p, " and ", q,
                                          " train on the same device (", reports[p].substr(3),
                                          "): give each rank its own (options.parallel.device, CUDA_VISIBLE_DEVICES)"));
  }
  /// Rank 0's host parameters, statistics and optimiser state to every rank, then to the device.
  void broadcast_model(const char* what) {
    broadcast_host_model(comm_, this->host_, this->opt_, what);
    this->after_load(); // rank 0 loaded or initialised the host copies; the others received them
  }

  std::uint64_t seed_;
  MpiCommunicator comm_;
  std::size_t rank_ = 0, world_ = 1;
  std::unique_ptr<DeviceReplica<Net, Backend, Opt, Precision>> dev_;
  std::unique_ptr<device::RankAllReduce<Comm, Backend>> reduce_;
  std::vector<std::size_t> bucket_of_layer_;
};

} // namespace cohort::detail
