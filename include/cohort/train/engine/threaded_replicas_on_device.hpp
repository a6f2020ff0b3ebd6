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
/// A step gives replica r its contiguous shard of the batch; after backward the gradients are
/// summed across replicas (device::ReplicaAllReduce: in replica order for ThrustDevice, an NCCL
/// all-reduce for Cuda), and every replica applies the same optimiser step to its own copy, so
/// the copies stay identical. Only replica 0 moves BatchNorm's running statistics; sync_buffers
/// (before evaluation and saving) copies them to the others. Full precision only.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"

namespace cohort::device {
/// Defined by the device backend's header (backend/device/replica_all_reduce.hpp; NCCL's for
/// Cuda): declared here so that this engine needs no Thrust header of its own.
template <class Backend>
class ReplicaAllReduce;
} // namespace cohort::device

namespace cohort::detail {

template <std::size_t N, class Backend, class Net, class Opt>
requires(!host_memory_backend<Backend>) class TrainEngine<ThreadedReplicas<N, Backend>, FullPrecision, Net, Opt>
    : public LocalCollectives, public FullPrecisionHooks {
  static_assert(
      requires { typename Opt::template rebind_backend<Backend>; },
      "Trainer: on a device backend the optimiser must be Sgd<>, Adam<> or Adadelta<> (an optimiser with "
      "rebind_backend; OptimizerVariant is host-only)");
  using device_opt = typename Opt::template rebind_backend<Backend>;
  using context = typename Backend::context;
  using K = ops::ElementwiseKernels<Backend>;
  static constexpr std::size_t in_size = Net::input_shape::size;

  /// Everything one device holds.
  struct DeviceReplica {
    explicit DeviceReplica(const Opt& opt) : opt(opt.options()) {}
    Parameters<Net, float, Backend> params;
    Gradients<Net, float, Backend> grads;
    Executor<Net, float, Backend> exec;
    default_loss_t<Net, float, Backend> loss;
    typename Backend::template buffer<float> input;
    std::vector<float> scores;
    device_opt opt;
  };

 public:
  using params_type = Parameters<Net, float, Cpu>; // the host copy
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : seed_(o.seed), n_(count(o.parallel)), team_(n_), host_(initialized_parameters<params_type>(o.seed)),
        opt_(std::move(opt)) {
    for (std::size_t r = 0; r < n_; ++r) {
      context c{};
      if constexpr (requires { c.device; }) c.device = o.parallel.device + int(r);
      ctx_.push_back(c);
    }
    replicas_.resize(n_);
    on_each([&](std::size_t r) { // allocate on the replica's own device
      replicas_[r] = std::make_unique<DeviceReplica>(opt_);
      DeviceReplica& d = *replicas_[r];
      d.opt.set_context(ctx_[r]);
      d.loss.set_context(ctx_[r]);
      d.params.copy_from(host_);
    });
    reduce_ = std::make_unique<device::ReplicaAllReduce<Backend>>(std::span<context>(ctx_));
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    const std::size_t n = labels.size();
    std::vector<double> loss(n_, 0.0);
    on_each([&](std::size_t r) {
      DeviceReplica& d = *replicas_[r];
      const auto [begin, count] = shard(n, r);
      if (count == 0) { // fewer samples than replicas: this one adds nothing
        if (m.index == 0) d.grads.values.fill(0.f);
        return;
      }
      const double share = double(count) / double(n);
      const auto y = d.exec.forward(ctx_[r], train_step_info(seed_, m, begin, 1, r == 0), d.params,
                                    upload(r, {x.data() + begin * in_size, count}));
      loss[r] = share * d.loss.forward(y, labels.subspan(begin, count), share / double(m.count));
      d.exec.backward(ctx_[r], d.params, d.grads, d.loss.backward(), {.accumulate = m.index > 0});
    });
    if (m.last()) {
      std::vector<float*> grads(n_);
      for (std::size_t r = 0; r < n_; ++r) grads[r] = replicas_[r]->grads.values.data();
      reduce_->sum(std::span<context>(ctx_), grads, host_.values.size());
      on_each([&](std::size_t r) {
        DeviceReplica& d = *replicas_[r];
        d.opt.step(std::span<float>(d.params.values.data(), d.params.values.size()),
                   std::span<const float>(d.grads.values.data(), d.grads.values.size()));
      });
      host_stale_ = true;
    }
    double total = 0;
    for (double l : loss) total += l;
    return total;
  }

  /// (correct predictions, summed loss) over the batch, the replicas evaluating shards of it.
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels) {
    std::vector<std::pair<std::size_t, double>> part(n_);
    on_each([&](std::size_t r) {
      DeviceReplica& d = *replicas_[r];
      const auto [begin, count] = shard(labels.size(), r);
      if (count == 0) return;
      const StepInfo info{.mode = Mode::eval, .seed = seed_, .update_buffers = false};
      const auto y = d.exec.forward(ctx_[r], info, d.params, upload(r, {x.data() + begin * in_size, count}));
      const double l = d.loss.forward(y, labels.subspan(begin, count));
      d.scores.resize(y.size());
      K::download(ctx_[r], y.data(), d.scores.data(), y.size());
      part[r] = {count_correct<Net>(d.scores.data(), labels.subspan(begin, count)), l * double(count)};
    });
    std::pair<std::size_t, double> total{};
    for (const auto& p : part) total.first += p.first, total.second += p.second;
    return total;
  }

  /// Replica 0's running statistics to every replica (before evaluating and saving).
  void sync_buffers() {
    if (n_ < 2) return;
    download();
    on_each([&](std::size_t r) {
      if (r > 0) replicas_[r]->params.copy_from(host_);
    });
  }

  params_type& parameters() {
    if (host_stale_) download();
    return host_;
  }
  Opt& optimizer() {
    if (host_stale_) download();
    return opt_;
  }
  std::size_t devices() const noexcept { return n_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }

  void before_save() {
    if (host_stale_) download();
  }
  /// The host parameters and optimiser state were loaded: every replica takes them.
  void after_load() {
    on_each([&](std::size_t r) {
      DeviceReplica& d = *replicas_[r];
      state_to_device<Backend>(ctx_[r], host_, opt_, d.params, d.opt);
    });
    host_stale_ = false;
  }

 private:
  static std::size_t count(const DataParallelOptions& o) { return replica_count<N>(o); }
  /// Samples [begin, begin + count) of a batch of n: replica r's contiguous shard.
  std::pair<std::size_t, std::size_t> shard(std::size_t n, std::size_t r) const noexcept {
    return contiguous_shard(n, n_, r);
  }
  /// f(r) for every replica, each on its own thread with its device made current.
  template <class F>
  void on_each(F&& f) {
    team_.parallel_for(n_, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) {
        if constexpr (requires { ctx_[r].activate(); }) ctx_[r].activate();
        f(r);
      }
    });
  }
  ConstBatchView<typename Net::input_shape, float> upload(std::size_t r, input_view x) {
    auto& in = replicas_[r]->input;
    in.resize(std::max(in.size(), x.size()));
    K::upload(ctx_[r], x.data(), in.data(), x.size());
    return {in.data(), x.batch()};
  }
  /// Replica 0's parameters, statistics and optimiser state into the host copies.
  void download() {
    DeviceReplica& d = *replicas_[0];
    if constexpr (requires { ctx_[0].activate(); }) ctx_[0].activate();
    state_to_host<Backend>(ctx_[0], d.params, d.opt, host_, opt_);
    host_stale_ = false;
  }

  std::uint64_t seed_;
  std::size_t n_;
  ThreadPool team_; // one thread per replica (the caller is replica 0's)
  params_type host_;
  Opt opt_;
  std::vector<context> ctx_;
  std::vector<std::unique_ptr<DeviceReplica>> replicas_;
  std::unique_ptr<device::ReplicaAllReduce<Backend>> reduce_;
  bool host_stale_ = false;
};

} // namespace cohort::detail
