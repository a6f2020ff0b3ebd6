#pragma once
/// \file
/// The engine of `ProcessGroupDDP<Mpi, Cpu>` with any precision policy (see
/// parallel/process_group_ddp.hpp).
/// Include it through <cohort/mpi.hpp>.
///
/// Start-up: checks the launch environment against MPI, compares every rank's network,
/// policies and settings (a hash, then the text where hashes differ), and takes rank 0's
/// initial parameters and buffers.
///
/// A step: the rank's batch runs forward and backward; as backward finishes the layers of a
/// gradient bucket, the bucket's reduction starts (non-blocking), so communication overlaps the
/// remaining layers. A bucket is reduced as reduce-scatter + all-gather: every element is summed
/// once, by one rank, so all ranks receive the same bits and stay identical. The loss carries
/// 1/world, so the sum is the average. Gradient accumulation (micro-batches before the last)
/// communicates nothing: DDP's no_sync. With class weights (CrossEntropyOptions) the ranks first
/// all-reduce their labels' class counts, and every rank divides by the global weight total
/// (torch's DDP would divide by each rank's own: not the single-process loss).
///
/// Deterministic mode: the rank's batch holds deterministic_chunks / world chunks of the global
/// batch (chunk j: global samples j, j + chunks, ...; DistributedSampler gives rank r the global
/// samples r, r + world, ..., so its chunks are j = r, r + world, ...). Each chunk's gradient is
/// computed on its own, buckets are all-gathered and every rank sums the chunks in chunk order:
/// the weights are bitwise the same for every world size dividing the chunk count, and the same
/// as ThreadedReplicas' deterministic mode.
///
/// Running statistics (BatchNorm) are updated by rank 0 only and sent to the others before
/// evaluation and checkpoints (DDP's broadcast_buffers).
///
/// Compression (DataParallelOptions::compression): the same operations on 16-bit values, summed
/// by an MPI reduction of their own that rounds every partial sum (parallel/gradient_compression.hpp);
/// error feedback's residuals go into checkpoints (train/error_feedback_state.hpp).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/parallel/gradient_buckets.hpp"
#include "cohort/parallel/gradient_compression.hpp"
#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/parallel/process_group_ddp.hpp"
#include "cohort/parallel/signature.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/error_feedback_exchange.hpp"
#include "cohort/train/engine/precision_state.hpp"
#include "cohort/train/engine/process_group_setup.hpp"

namespace cohort::detail {

template <class Precision, class Net, class Opt>
requires known_precision<Precision>
class TrainEngine<ProcessGroupDDP<Mpi, Cpu>, Precision, Net, Opt>
    : public PrecisionHooks<TrainEngine<ProcessGroupDDP<Mpi, Cpu>, Precision, Net, Opt>> {
 public:
  static constexpr bool distributed = true;
  using params_type = Parameters<Net, float, Cpu>;
  TrainEngine(const TrainEngine&) = delete;
  TrainEngine& operator=(const TrainEngine&) = delete;
  ~TrainEngine() {
    MpiCommunicator::release(scatter_comm_);
    MpiCommunicator::release(gather_comm_);
  }
  using compute_type = typename PrecisionState<Precision, Net>::compute_type;
  using grads_type = Gradients<Net, compute_type, Cpu>;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : o_(o.parallel), seed_(o.seed), comm_(o.parallel.timeout_s),
        params_(initialized_parameters<params_type>(o.seed)), prec_(params_, o.loss_scale),
        replica_(ThreadPool::global(), o.loss, o.frozen, o.eval_chunk, o.ignore_index, o.regression, o.tta),
        opt_(std::move(opt)) {
    rank_ = std::size_t(comm_.rank());
    world_ = std::size_t(comm_.size());
    scatter_comm_ = comm_.duplicate();
    gather_comm_ = comm_.duplicate();
    check_launch_environment(comm_);
    if (o_.bucket_kib == 0) throw ValueError("ProcessGroupDDP: bucket_kib must be at least 1");
    agree_across_ranks(comm_, ddp_agreement_lines<Net, Precision>("ProcessGroupDDP<Mpi>", opt_, o_, o.agreement));
    check_chunks(o_, world_, "world size");
    broadcast_model("rank 0's initial parameters");
    buckets_ = plan_buckets<Net>(o_.bucket_kib * 1024, o.frozen); // frozen layers send nothing
    bucket_of_layer_ = bucket_of_layer<Net>(buckets_);
    state_.resize(buckets_.size());
    if (o_.deterministic) {
      slots_.resize(o_.deterministic_chunks / world_);
      for (auto& g : slots_) g = std::make_unique<grads_type>();
    }
    if (compressed() && o_.error_feedback) residual_.assign(ef_slots() * Net::parameter_store_size, 0.f);
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      BucketState& s = state_[b];
      const std::size_t len = buckets_[b].size();
      if (o_.deterministic && compressed()) {
        s.send16.resize(slots_.size() * len);
        s.recv16.resize(o_.deterministic_chunks * len);
      } else if (o_.deterministic) {
        s.send.resize(slots_.size() * len);
        s.recv.resize(o_.deterministic_chunks * len);
      } else {
        s.counts.resize(world_);
        s.displs.resize(world_);
        for (std::size_t p = 0, at = 0; p < world_; ++p) {
          s.counts[p] = int(len / world_ + (p < len % world_ ? 1 : 0));
          s.displs[p] = int(at);
          at += std::size_t(s.counts[p]);
        }
        if (compressed()) {
          s.send16.resize(len);
          s.segment16.resize(std::size_t(s.counts[rank_]) + 1);
        } else {
          s.segment.resize(std::size_t(s.counts[rank_]) + 1);
        }
      }
    }
  }

  /// `labels`: class labels or masks (int32), or a dense network's float regression targets (one
  /// per output element).
  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) { return step_on(x, labels, m); }
  double step(input_view x, std::span<const float> targets, const MicroStep& m) { return step_on(x, targets, m); }
  template <TargetElement L>
  double step_on(input_view x, std::span<const L> labels, const MicroStep& m) {
    if (m.index == 0) comm_.begin_step(m.step);
    // Class weights: every rank normalises by the weight total of all ranks' labels.
    const double total = step_weight_total<classes_of<Net>>(replica_.loss(), labels, *this);
    const double local = o_.deterministic ? step_chunks(x, labels, m, total) : step_rank(x, labels, m, total);
    if (!m.last()) return local;
    finish_buckets();
    double loss = local / double(world_);
    comm_.allreduce_sum(&loss, 1, "the all-reduce of the loss");
    // Every rank holds the same summed gradients, so every rank takes the same overflow decision.
    if (prec_.prepare_step(ThreadPool::global(), grads_.values.span())) {
      opt_.step(params_.values.span(), std::span<const float>(grads_.values.data(), grads_.values.size()));
      prec_.after_step(ThreadPool::global());
    }
    return loss;
  }

  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    return evaluate_on(x, labels, metrics);
  }
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const float> targets) {
    return evaluate_on(x, targets, nullptr);
  }
  template <TargetElement L>
  std::pair<std::size_t, double> evaluate_on(input_view x, std::span<const L> labels, SegmentationMetrics* metrics) {
    return replica_.evaluate(prec_.compute(), x, labels, seed_, prec_.master_values(), metrics);
  }

  std::size_t rank() const noexcept { return rank_; }
  std::size_t world() const noexcept { return world_; }
  std::size_t devices() const noexcept { return world_; }
  params_type& parameters() noexcept { return params_; }
  Opt& optimizer() noexcept { return opt_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  MpiCommunicator& communicator() noexcept { return comm_; }
  PrecisionState<Precision, Net>& precision() noexcept { return prec_; }
  const std::vector<GradientBucket>& buckets() const noexcept { return buckets_; }

  void barrier(const char* what) { comm_.barrier(what); }
  void sum(std::span<double> values, const char* what) {
    comm_.allreduce_sum(values.data(), values.size(), concat("the all-reduce of ", what));
  }
  /// Rank 0's running statistics and counters (the live ones: the compute parameters') to
  /// every rank.
  void sync_buffers() { broadcast_buffers(comm_, prec_.compute()); }
  /// Rank 0's error (if any), else its trainer state, parameters and optimiser state.
  template <class State>
  void share_from_root(std::string& error, State& state) {
    if (share_root_outcome(comm_, error, state)) broadcast_model("rank 0's checkpoint");
  }
  /// Error feedback's residuals at rank 0 for a checkpoint, and back from one (collectives).
  ErrorFeedbackState gather_error_feedback() {
    return cohort::detail::gather_error_feedback(comm_, residual_, ef_slots(), o_.deterministic);
  }
  void scatter_error_feedback(const ErrorFeedbackState& s) {
    cohort::detail::scatter_error_feedback(comm_, s, residual_, ef_slots(), o_.deterministic);
  }

 private:
  /// One bucket's reduction in flight: reduce-scatter then all-gather (or one all-gather in
  /// deterministic mode).
  struct BucketState {
    int stage = 0; // 0 not started, 1 first operation running, 2 waiting for the second, 3 second running, 4 done
    MPI_Request req = MPI_REQUEST_NULL;
    std::vector<int> counts, displs;
    std::vector<float> segment;    // this rank's reduced part (reduce-scatter)
    std::vector<float> send, recv; // deterministic: this rank's chunks, everyone's chunks
    // Compressed: the bucket (then the gathered sums) and this rank's reduced part; in
    // deterministic mode this rank's chunks and everyone's.
    std::vector<std::uint16_t> send16, segment16, recv16;
  };

  bool compressed() const noexcept { return o_.compression != GradientCompression::none; }
  std::size_t ef_slots() const noexcept { return o_.deterministic ? slots_.size() : 1; }
  /// The MPI reduction that sums 16-bit values as o_.compression rounds them.
  MPI_Op sum16() const { return compressed_sum_op(o_.compression); }
  float* residual(std::size_t slot, std::size_t begin) {
    return residual_.empty() ? nullptr : residual_.data() + slot * Net::parameter_store_size + begin;
  }

  /// Rank 0's master parameters, statistics and optimiser state to every rank (and compute copy).
  void broadcast_model(const char* what) {
    broadcast_host_model(comm_, params_, opt_, what);
    prec_.after_load(ThreadPool::global());
  }

  /// The rank's batch in one pass; buckets start from the backward hook on the last micro-batch.
  /// Returns the rank's loss as a local mean (the global one times world).
  template <TargetElement L>
  double step_rank(input_view x, std::span<const L> labels, const MicroStep& m, double total) {
    // The rank's mean carries 1 / world; with class weights, the global weight total does.
    const double scale = prec_.loss_factor() / ((total > 0 ? 1.0 : double(world_)) * double(m.count));
    const double per_world = total > 0 ? double(world_) : 1.0;
    const StepInfo info = train_step_info(seed_, m, rank_, world_, rank_ == 0);
    if (!m.last())
      return per_world * replica_.train(prec_.compute(), grads_, x, labels, info, scale, m.index > 0, NoHook{},
                                        prec_.master_values(), total);
    reset_buckets();
    return per_world * replica_.train(
                           prec_.compute(), grads_, x, labels, info, scale, m.index > 0,
                           [&](std::size_t layer) { layer_done(layer); }, prec_.master_values(), total);
  }

  /// Deterministic mode: this rank's chunks one by one, each into its own store.
  template <TargetElement L>
  double step_chunks(input_view x, std::span<const L> labels, const MicroStep& m, double total) {
    constexpr std::size_t per = targets_per_sample<Net, L>;
    const std::size_t chunks = o_.deterministic_chunks, per_rank = slots_.size();
    auto& chunk_labels = replica_.template chunk_targets_of<L>();
    if (m.last()) reset_buckets();
    double loss = 0;
    for (std::size_t s = 0; s < per_rank; ++s) {
      const std::size_t j = chunk_of(rank_, s, world_); // the global chunk in slot s (as checkpoints store it)
      const std::size_t count =
          gather_strided<typename Net::input_shape, per>(x.data(), labels, s, per_rank, replica_.chunk_x, chunk_labels);
      grads_type& g = *slots_[s];
      if (count == 0) {
        if (m.index == 0) g.values.fill(0.f);
        continue;
      }
      const ShardNorm norm = shard_norm(count, labels.size() / per * world_, total);
      const StepInfo info = train_step_info(seed_, m, j, chunks, j == 0);
      const input_view chunk{replica_.chunk_x.data(), count};
      const double scale = prec_.loss_factor() * norm.share / double(m.count);
      if (m.last() && s + 1 == per_rank)
        loss +=
            norm.share * replica_.train(
                             prec_.compute(), g, chunk, std::span<const L>(chunk_labels), info, scale, m.index > 0,
                             [&](std::size_t layer) { layer_done(layer); }, prec_.master_values(), norm.denominator);
      else
        loss += norm.share * replica_.train(prec_.compute(), g, chunk, std::span<const L>(chunk_labels), info, scale,
                                            m.index > 0, NoHook{}, prec_.master_values(), norm.denominator);
    }
    return loss * double(world_); // the rank's share of the global mean, as a local mean
  }

  void reset_buckets() {
    for (auto& s : state_) s.stage = 0;
    next_gather_ = 0;
  }

  /// Backward has finished `layer`: start the bucket it completes, and move the others along.
  void layer_done(std::size_t layer) {
    const std::size_t b = bucket_of_layer_[layer];
    if (b != no_bucket) start(b);
    progress();
  }

  // Every rank must start the collectives of a communicator in the same order. Reduce-scatters
  // start in bucket order (the backward hooks fire in layer order on every rank); a bucket's
  // all-gather can only start once its reduce-scatter is done, which happens at different times
  // on different ranks, so all-gathers run on a communicator of their own and also start in
  // bucket order (a finished bucket waits for the ones before it).

  void start(std::size_t b) {
    BucketState& s = state_[b];
    const GradientBucket& k = buckets_[b];
    const std::size_t len = k.size();
    if (o_.deterministic && compressed()) {
      for (std::size_t slot = 0; slot < slots_.size(); ++slot)
        pack_gradients(o_.compression, slots_[slot]->values.data() + k.begin, s.send16.data() + slot * len, len,
                       residual(slot, k.begin));
      comm_.check(MPI_Iallgather(s.send16.data(), int(s.send16.size()), MPI_UINT16_T, s.recv16.data(),
                                 int(s.send16.size()), MPI_UINT16_T, gather_comm_, &s.req),
                  "MPI_Iallgather", bucket_name(b));
      s.stage = 3;
      comm_.started(bucket_name(b));
    } else if (o_.deterministic) {
      for (std::size_t slot = 0; slot < slots_.size(); ++slot)
        std::copy(slots_[slot]->values.data() + k.begin, slots_[slot]->values.data() + k.end,
                  s.send.data() + slot * len);
      comm_.check(MPI_Iallgather(s.send.data(), int(s.send.size()), MPI_FLOAT, s.recv.data(), int(s.send.size()),
                                 MPI_FLOAT, gather_comm_, &s.req),
                  "MPI_Iallgather", bucket_name(b));
      s.stage = 3;
      comm_.started(bucket_name(b));
    } else if (compressed()) {
      pack_gradients(o_.compression, grads_.values.data() + k.begin, s.send16.data(), len, residual(0, k.begin));
      comm_.check(MPI_Ireduce_scatter(s.send16.data(), s.segment16.data(), s.counts.data(), MPI_UINT16_T, sum16(),
                                      scatter_comm_, &s.req),
                  "MPI_Ireduce_scatter", bucket_name(b));
      s.stage = 1;
      comm_.started(bucket_name(b));
    } else {
      comm_.check(MPI_Ireduce_scatter(grads_.values.data() + k.begin, s.segment.data(), s.counts.data(), MPI_FLOAT,
                                      MPI_SUM, scatter_comm_, &s.req),
                  "MPI_Ireduce_scatter", bucket_name(b));
      s.stage = 1;
      comm_.started(bucket_name(b));
    }
  }

  /// Tests the buckets in flight; starts the all-gathers of finished reduce-scatters, in order.
  void progress() {
    for (std::size_t b = 0; b < state_.size(); ++b) {
      BucketState& s = state_[b];
      if (s.stage != 1 && s.stage != 3) continue;
      int done = 0;
      comm_.check(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE), "MPI_Test", bucket_name(b));
      if (done) s.stage = s.stage == 1 ? 2 : 4;
    }
    while (next_gather_ < state_.size() && state_[next_gather_].stage == 2) {
      BucketState& s = state_[next_gather_];
      const GradientBucket& k = buckets_[next_gather_];
      if (compressed()) // the sums, still 16-bit, into the bucket's send buffer (its send is done)
        comm_.check(MPI_Iallgatherv(s.segment16.data(), s.counts[rank_], MPI_UINT16_T, s.send16.data(), s.counts.data(),
                                    s.displs.data(), MPI_UINT16_T, gather_comm_, &s.req),
                    "MPI_Iallgatherv", bucket_name(next_gather_));
      else
        comm_.check(MPI_Iallgatherv(s.segment.data(), s.counts[rank_], MPI_FLOAT, grads_.values.data() + k.begin,
                                    s.counts.data(), s.displs.data(), MPI_FLOAT, gather_comm_, &s.req),
                    "MPI_Iallgatherv", bucket_name(next_gather_));
      s.stage = 3;
      comm_.started(bucket_name(next_gather_));
      ++next_gather_;
    }
  }

  /// Waits for every bucket (starting any the backward pass did not: a chunk-less rank).
  void finish_buckets() {
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      if (state_[b].stage == 0) start(b);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      comm_.wait_until(bucket_name(b), [&] {
        progress();
        return state_[b].stage == 4;
      });
    if (!o_.deterministic) {
      if (compressed()) // the gathered 16-bit sums, widened for the optimiser
        for (std::size_t b = 0; b < buckets_.size(); ++b)
          unpack_gradients(o_.compression, state_[b].send16.data(), grads_.values.data() + buckets_[b].begin,
                           buckets_[b].size());
      return;
    }
    // Every chunk's gradient, summed in chunk order (the same order ThreadedReplicas uses).
    const std::size_t chunks = o_.deterministic_chunks, per_rank = slots_.size();
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const GradientBucket& k = buckets_[b];
      const std::size_t len = k.size();
      const float* recv = state_[b].recv.data();
      const std::uint16_t* recv16 = state_[b].recv16.data();
      const GradientCompression c = o_.compression;
      float* out = grads_.values.data() + k.begin;
      const auto chunk_at = [&](std::size_t j, std::size_t i) {
        const std::size_t at = ((j % world_) * per_rank + j / world_) * len + i; // chunk 0: rank 0, slot 0
        return c == GradientCompression::none ? recv[at] : from_wire(c, recv16[at]);
      };
      ThreadPool::global().parallel_for(len, 16 * 1024, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) {
          float sum = chunk_at(0, i);
          for (std::size_t j = 1; j < chunks; ++j) sum += chunk_at(j, i);
          out[i] = sum;
        }
      });
    }
  }

  std::string bucket_name(std::size_t b) const {
    return concat("the ", o_.deterministic ? "all-gather" : "all-reduce", " of gradient bucket ", b, " (layers ",
                  buckets_[b].first_layer, "+, ", buckets_[b].size(), " values)");
  }

  DataParallelOptions o_;
  std::uint64_t seed_;
  MpiCommunicator comm_;
  std::size_t rank_ = 0, world_ = 1;
  params_type params_; // float master parameters
  PrecisionState<Precision, Net> prec_;
  grads_type grads_;
  Replica<Net, compute_type> replica_;
  Opt opt_;
  std::vector<GradientBucket> buckets_;
  std::vector<std::size_t> bucket_of_layer_;
  std::vector<BucketState> state_;
  std::vector<std::unique_ptr<grads_type>> slots_; // deterministic: this rank's chunks
  std::vector<float> residual_; // error feedback: what rounding dropped, per slot (one outside deterministic mode)
  MPI_Comm scatter_comm_ = MPI_COMM_NULL, gather_comm_ = MPI_COMM_NULL; // see start()
  std::size_t next_gather_ = 0;                                         // the next bucket whose all-gather may start
};

} // namespace cohort::detail
