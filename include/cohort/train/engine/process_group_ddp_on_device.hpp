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
/// The device is `options.parallel.device` + the rank's local rank on its node (MPI's shared-
/// memory split), as seed 002's `rank = node * gpus + local_rank`. Full precision only.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/parallel/process_group_ddp.hpp"
#include "cohort/parallel/signature.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/engine/device_state.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/process_group_ddp.hpp"

namespace cohort::device {
/// How the ranks of ProcessGroupDDP<Comm, Backend> sum their gradients (in place, n floats on the
/// device). This primary template serves Comm = Mpi: a host copy, MPI_Allreduce in double, and
/// back. cohort/parallel/nccl.cuh specialises it for <Nccl, Cuda>.
template <class Comm, class Backend>
class RankAllReduce {
  static_assert(std::is_same_v<Comm, Mpi>,
                "ProcessGroupDDP<Nccl, Cuda>: #include <cohort/parallel/nccl.cuh> and link the cohort::nccl CMake "
                "target");

 public:
  RankAllReduce(MpiCommunicator&, typename Backend::context&) {}
  void sum(MpiCommunicator& comm, typename Backend::context& ctx, float* grads, std::size_t n) {
    host_.resize(n);
    sums_.resize(n);
    ops::ElementwiseKernels<Backend>::download(ctx, grads, host_.data(), n);
    for (std::size_t i = 0; i < n; ++i) sums_[i] = host_[i];
    comm.allreduce_sum(sums_.data(), n, "the all-reduce of the gradients");
    for (std::size_t i = 0; i < n; ++i) host_[i] = float(sums_[i]);
    ops::ElementwiseKernels<Backend>::upload(ctx, host_.data(), grads, n);
  }

 private:
  std::vector<float> host_;
  std::vector<double> sums_;
};
} // namespace cohort::device

namespace cohort::detail {

template <class Comm, class Backend, class Net, class Opt>
requires(!host_memory_backend<Backend>) class TrainEngine<ProcessGroupDDP<Comm, Backend>, FullPrecision, Net, Opt>
    : public FullPrecisionHooks {
  static_assert(has_device_optimizer<Opt, Backend>,
                "Trainer: on a device backend the optimiser must be Sgd<>, Adam<> or Adadelta<> (an optimiser with "
                "rebind_backend; OptimizerVariant is host-only)");
  using context = typename Backend::context;

 public:
  static constexpr bool distributed = true;
  using params_type = Parameters<Net, float, Cpu>; // the host copy
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  TrainEngine(Opt opt, const EngineOptions& o)
      : seed_(o.seed), comm_(o.parallel.timeout_s), host_(initialized_parameters<params_type>(o.seed)),
        opt_(std::move(opt)) {
    rank_ = std::size_t(comm_.rank());
    world_ = std::size_t(comm_.size());
    check_launch_environment(comm_);
    if (o.parallel.deterministic)
      throw ValueError("ProcessGroupDDP on a device backend: deterministic mode is not implemented");
    std::vector<std::string> lines = network_signature<Net>();
    lines.push_back(concat("parallel: ProcessGroupDDP<", Comm::name, ", ", Backend::name, ">"));
    lines.push_back("precision: FullPrecision");
    lines.push_back(concat("optimizer: ", optimizer_name(opt_)));
    lines.insert(lines.end(), o.agreement.begin(), o.agreement.end());
    agree_across_ranks(comm_, lines);
    context ctx{};
    if constexpr (requires { ctx.device; }) ctx.device = o.parallel.device + comm_.local_rank();
    if constexpr (requires { ctx.activate(); }) ctx.activate(); // before anything allocates on the device
    dev_ = std::make_unique<DeviceReplica<Net, Backend, Opt>>(opt_, ctx);
    reduce_ = std::make_unique<device::RankAllReduce<Comm, Backend>>(comm_, dev_->ctx());
    broadcast_model("rank 0's initial parameters");
  }

  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) {
    if (m.index == 0) comm_.begin_step(m.step);
    // The ranks' gradients are summed: each scales its mean by 1 / world (and by the micro-batch
    // share under accumulation), as the CPU engine does.
    const double local = dev_->train(train_step_info(seed_, m, rank_, world_, rank_ == 0), x, labels,
                                     1.0 / (double(world_) * double(m.count)), m.index > 0);
    if (!m.last()) return local;
    reduce_->sum(comm_, dev_->ctx(), dev_->gradients(), dev_->size());
    double loss = local / double(world_);
    comm_.allreduce_sum(&loss, 1, "the all-reduce of the loss");
    dev_->step();
    host_stale_ = true;
    return loss;
  }

  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels) {
    return dev_->evaluate(x, labels, seed_);
  }

  std::size_t rank() const noexcept { return rank_; }
  std::size_t world() const noexcept { return world_; }
  std::size_t devices() const noexcept { return world_; }
  params_type& parameters() {
    if (host_stale_) download();
    return host_;
  }
  Opt& optimizer() {
    if (host_stale_) download();
    return opt_;
  }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  MpiCommunicator& communicator() noexcept { return comm_; }

  void barrier(const char* what) { comm_.barrier(what); }
  void sum(std::span<double> values, const char* what) {
    comm_.allreduce_sum(values.data(), values.size(), concat("the all-reduce of ", what));
  }
  /// Rank 0's running statistics and counters to every rank.
  void sync_buffers() {
    download();
    broadcast_buffers(comm_, host_);
    dev_->parameters().copy_from(host_);
  }
  /// Rank 0's error (if any), else its trainer state, parameters and optimiser state.
  template <class State>
  void share_from_root(std::string& error, State& state) {
    if (share_root_outcome(comm_, error, state)) broadcast_model("rank 0's checkpoint");
  }

  void before_save() {
    if (host_stale_) download();
  }
  /// Rank 0 loaded the host copies (the others receive them in share_from_root).
  void after_load() {
    dev_->from_host(host_, opt_);
    host_stale_ = false;
  }

 private:
  void download() {
    dev_->to_host(host_, opt_);
    host_stale_ = false;
  }
  /// Rank 0's host parameters, statistics and optimiser state to every rank, then to the device.
  void broadcast_model(const char* what) {
    broadcast_host_model(comm_, host_, opt_, what);
    after_load();
  }

  std::uint64_t seed_;
  MpiCommunicator comm_;
  std::size_t rank_ = 0, world_ = 1;
  params_type host_;
  Opt opt_;
  std::unique_ptr<DeviceReplica<Net, Backend, Opt>> dev_;
  std::unique_ptr<device::RankAllReduce<Comm, Backend>> reduce_;
  bool host_stale_ = false;
};

} // namespace cohort::detail
