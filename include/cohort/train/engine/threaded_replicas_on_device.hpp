#pragma once
/// \file
/// The engine of `ThreadedReplicas<N, B>` for a device backend B: one replica per device, each
/// with its own copy of the parameters, gradients and optimiser state on its device, driven by
/// its own thread (torch.nn.parallel.DistributedDataParallel within one process, not
/// DataParallel's scatter/gather of the model every step).
///
///     cohort::Trainer<Net, cohort::Adam<>, cohort::ThreadedReplicas<4, cohort::Cuda>> trainer(opt, options);
///     // GPUs options.parallel.device .. device + 3; needs cohort/parallel/nccl.cuh for Cuda
///
/// A step gives replica r its contiguous shard of the batch. The gradients are summed across
/// replicas bucket by bucket (`options.parallel.bucket_kib`) as backward completes each bucket,
/// so the sums overlap the rest of backward (device::ReplicaAllReduce: in replica order by the
/// last replica to finish the bucket for ThrustDevice, an NCCL all-reduce on a communication
/// stream per GPU for Cuda); then every replica applies the same optimiser step to its own copy,
/// so the copies stay identical. Only replica 0 moves BatchNorm's running statistics; sync_buffers
/// (before evaluation and saving) copies them to the others. Under MixedPrecision every replica
/// computes with its 16-bit copy and checks the same summed gradients.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/device_assignment.hpp"
#include "cohort/parallel/gradient_buckets.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/replica_threads.hpp"

namespace cohort::device {
/// Defined by the device backend's header (backend/device/replica_all_reduce.hpp; NCCL's for
/// Cuda): declared here so that this engine needs no Thrust header of its own.
template <class Backend>
class ReplicaAllReduce;
} // namespace cohort::device

namespace cohort::detail {

template <std::size_t N, class Backend, class Precision, class Net, class Opt>
requires(!host_memory_backend<Backend> &&
         known_precision<Precision>) class TrainEngine<ThreadedReplicas<N, Backend>, Precision, Net, Opt>
    : public LocalCollectives,
      public DeviceEngineBase<TrainEngine<ThreadedReplicas<N, Backend>, Precision, Net, Opt>, Net, Opt> {
  using base = DeviceEngineBase<TrainEngine, Net, Opt>;
  friend base;
  using context = typename Backend::context;
  using replica_type = DeviceReplica<Net, Backend, Opt, Precision>;
  static constexpr std::size_t in_size = Net::input_shape::size;
  static constexpr std::size_t per = labels_per_sample<Net>; // labels per sample (a dense network's H * W)

 public:
  using typename base::params_type;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : base(std::move(opt), o.seed), seed_(o.seed), n_(replica_count<N>(o.parallel)), threads_(n_) {
    if constexpr (requires { context::visible_devices(); })
      if (const int visible = context::visible_devices();
          o.parallel.device < 0 || o.parallel.device + int(n_) > visible)
        throw DeviceError(concat("ThreadedReplicas: ", n_, " replicas on devices ", o.parallel.device, "..",
                                 o.parallel.device + int(n_) - 1, " (options.parallel.device and replicas), but this ",
                                 "process sees ", visible, " (", visible_devices_variable(), ")"));
    replicas_.resize(n_);
    std::vector<context> ctx(n_);
    on_threads([&](std::size_t r) { // allocate on the replica's own device
      ctx[r] = device_context<context>(o.parallel.device + int(r), o.parallel);
      replicas_[r] = std::make_unique<replica_type>(this->opt_, ctx[r], o.loss_scale, o.loss, o.frozen, o.eval_chunk,
                                                    o.ignore_index);
      replicas_[r]->load_parameters(this->host_);
    });
    if (o.parallel.deterministic)
      throw ValueError("ThreadedReplicas on a device backend: deterministic mode is not implemented");
    if (o.parallel.bucket_kib == 0) throw ValueError("ThreadedReplicas: bucket_kib must be at least 1");
    reduce_ = std::make_unique<device::ReplicaAllReduce<Backend>>(
        std::span<context>(ctx), plan_buckets<Net>(o.parallel.bucket_kib * 1024, o.frozen), o.parallel.timeout_s);
    bucket_of_layer_ = bucket_of_layer<Net>(reduce_->buckets());
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    const double weights = step_weight_total<classes_of<Net>>(replicas_[0]->loss(), labels, *this);
    std::vector<double> loss(n_, 0.0);
    if (m.last()) {
      std::vector<float*> grads(n_);
      for (std::size_t r = 0; r < n_; ++r) grads[r] = replicas_[r]->gradients();
      reduce_->begin(grads, m.step);
    }
    // One concurrent phase per step: every replica, idle or not, trains, starts its buckets,
    // waits for the sums and steps while the others do. An all-reduce may block its caller until
    // every peer has started it (NCCL's connection set-up, or a cudaFree in backward waiting for
    // the spinning NCCL kernel): a replica without samples that started its buckets only after
    // the others' backward returned would never be reached.
    std::vector<std::exception_ptr> errors(n_);
    std::atomic<std::size_t> first_failed{no_replica};
    on_each([&](std::size_t r, replica_type& d) {
      try {
        train_replica(r, d, x, labels, m, weights, loss[r]);
        if (m.last()) {
          reduce_->finish(r, d.ctx());
          d.step();
        }
      } catch (...) {
        errors[r] = std::current_exception();
        std::size_t none = no_replica;
        first_failed.compare_exchange_strong(none, r);
        reduce_->abandon(r); // peers waiting for this replica's buckets fail instead of hanging
      }
    });
    // The error of the replica that failed first, not a peer's "abandoned" that followed it.
    if (const std::size_t r = first_failed.load(); r != no_replica) std::rethrow_exception(errors[r]);
    if (m.last()) this->mark_trained();
    double total = 0;
    for (double l : loss) total += l;
    return total;
  }

  /// (correct predictions, summed loss) over the batch, the replicas evaluating shards of it (a
  /// dense network's each into its own copy of `metrics`, merged in replica order).
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    std::vector<std::pair<std::size_t, double>> part(n_);
    std::vector<SegmentationMetrics> part_metrics;
    if (metrics) part_metrics.assign(n_, SegmentationMetrics(metrics->classes(), metrics->ignore_index()));
    on_each([&](std::size_t r, replica_type& d) {
      const auto [begin, count] = contiguous_shard(labels.size() / per, n_, r);
      if (count > 0)
        part[r] = d.evaluate({x.data() + begin * in_size, count}, labels.subspan(begin * per, count * per), seed_,
                             metrics ? &part_metrics[r] : nullptr);
    });
    std::pair<std::size_t, double> total{};
    for (const auto& p : part) total.first += p.first, total.second += p.second;
    for (const auto& m : part_metrics) metrics->merge(m);
    return total;
  }

  /// Replica 0's running statistics to every replica (before evaluating and saving).
  void sync_buffers() {
    if (n_ < 2) return;
    this->download();
    on_each([&](std::size_t r, replica_type& d) {
      if (r > 0) d.load_parameters(this->host_);
    });
  }

  std::size_t devices() const noexcept { return n_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }

 private:
  /// Replica r's share of the micro-batch: forward and backward on its contiguous shard, its
  /// buckets started as backward completes them on the last micro-batch. A replica without
  /// samples only zeroes its gradients (reduce_->finish starts its buckets).
  void train_replica(std::size_t r, replica_type& d, input_view x, std::span<const std::int32_t> labels,
                     const MicroStep& m, double weights, double& loss) {
    const std::size_t n = labels.size() / per;
    const auto [begin, count] = contiguous_shard(n, n_, r);
    if (count == 0) {
      if (m.index == 0) d.zero_grad();
      return;
    }
    const ShardNorm s = shard_norm(count, n, weights);
    const StepInfo info = train_step_info(seed_, m, begin, 1, r == 0);
    const input_view shard{x.data() + begin * in_size, count};
    const auto shard_labels = labels.subspan(begin * per, count * per);
    const double share = s.share / double(m.count);
    if (!m.last()) {
      loss = s.share * d.train(info, shard, shard_labels, share, m.index > 0, NoHook{}, s.denominator);
      return;
    }
    loss = s.share * d.train(
                         info, shard, shard_labels, share, m.index > 0,
                         [&](std::size_t layer) {
                           if (const std::size_t b = bucket_of_layer_[layer]; b != no_bucket)
                             reduce_->start(r, d.ctx(), b);
                         },
                         s.denominator);
  }

  /// f(r) for every replica index, each on its own thread, all at once.
  template <class F>
  void on_threads(F&& f) {
    threads_.run(std::forward<F>(f));
  }
  /// f(r, replica r) for every replica, on its own thread with its device current.
  template <class F>
  void on_each(F&& f) {
    on_threads([&](std::size_t r) {
      replicas_[r]->activate();
      f(r, *replicas_[r]);
    });
  }
  replica_type& first_replica() noexcept { return *replicas_[0]; }
  template <class F>
  void for_each_replica(F&& f) {
    for (auto& d : replicas_) f(*d);
  }

  static constexpr std::size_t no_replica = std::size_t(-1);

  std::uint64_t seed_;
  std::size_t n_;
  ReplicaThreads threads_; // one per replica (the caller is replica 0's)
  std::vector<std::unique_ptr<replica_type>> replicas_;
  std::unique_ptr<device::ReplicaAllReduce<Backend>> reduce_;
  std::vector<std::size_t> bucket_of_layer_;
};

} // namespace cohort::detail
