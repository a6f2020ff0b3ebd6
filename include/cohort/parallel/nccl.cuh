#pragma once
/// \file
/// NCCL for the Cuda backend: the gradient all-reduce of `ThreadedReplicas<N, Cuda>` (one
/// communicator per GPU of the process, from ncclCommInitAll) and of `ProcessGroupDDP<Nccl, Cuda>`
/// (one process per GPU: rank 0's NCCL unique id broadcast over MPI, ncclCommInitRank, as Horovod
/// does). CUDA code: compile with nvcc, link cohort::nccl (which brings MPI).
///
///     #include <cohort/parallel/nccl.cuh>
///     cohort::Trainer<Net, cohort::Sgd<>, cohort::ThreadedReplicas<4, cohort::Cuda>> trainer(opt, options);
///
/// Every NCCL call is checked: a failure is a CudaError naming the call, the device and the rank.

#if !defined(__CUDACC__)
#error "cohort/parallel/nccl.cuh is CUDA code: compile it with nvcc (CMake: a .cu source linked to cohort::nccl)"
#endif

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include <nccl.h>

#include "cohort/backend/cuda.cuh"
#include "cohort/backend/device/replica_all_reduce.hpp"
#include "cohort/mpi.hpp"

namespace cohort {

/// NCCL between GPUs (ProcessGroupDDP<Nccl, Cuda>: declared in parallel/process_group_ddp.hpp).
struct Nccl {
  static constexpr std::string_view name = "Nccl";
};

namespace gpu::detail {
inline void check(ncclResult_t r, const char* call, int device) {
  if (r != ncclSuccess)
    throw CudaError(cohort::detail::concat(call, " failed: ", ncclGetErrorString(r), where(device)));
}
} // namespace gpu::detail

namespace gpu {
/// One NCCL communicator per device of this process (ncclCommInitAll), destroyed with it.
class NcclCommunicators {
 public:
  explicit NcclCommunicators(std::vector<int> devices) : devices_(std::move(devices)), comms_(devices_.size()) {
    COHORT_CUDA_CHECK(ncclCommInitAll(comms_.data(), int(comms_.size()), devices_.data()), devices_.front());
  }
  NcclCommunicators(const NcclCommunicators&) = delete;
  NcclCommunicators& operator=(const NcclCommunicators&) = delete;
  ~NcclCommunicators() {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c); // no throwing from a destructor
  }
  ncclComm_t operator[](std::size_t r) const noexcept { return comms_[r]; }
  std::size_t size() const noexcept { return comms_.size(); }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};
} // namespace gpu

/// ThreadedReplicas<N, Cuda>: the replicas' gradients summed by one grouped ncclAllReduce, each
/// on its replica's stream (the optimiser step queued after it on the same stream sees the sum).
template <>
class device::ReplicaAllReduce<Cuda> {
 public:
  explicit ReplicaAllReduce(std::span<CudaContext> ctx) : comms_(devices_of(ctx)) {}

  void sum(std::span<CudaContext> ctx, std::span<float* const> grads, std::size_t n) {
    // One thread drives every communicator: the calls must form a group, or the first would wait
    // for the others forever.
    COHORT_CUDA_CHECK(ncclGroupStart(), ctx[0].device);
    for (std::size_t r = 0; r < grads.size(); ++r)
      COHORT_CUDA_CHECK(ncclAllReduce(grads[r], grads[r], n, ncclFloat, ncclSum, comms_[r], ctx[r].stream),
                        ctx[r].device);
    COHORT_CUDA_CHECK(ncclGroupEnd(), ctx[0].device);
  }

 private:
  static std::vector<int> devices_of(std::span<CudaContext> ctx) {
    std::vector<int> d;
    for (const CudaContext& c : ctx) d.push_back(c.device);
    return d;
  }
  gpu::NcclCommunicators comms_;
};

/// ProcessGroupDDP<Nccl, Cuda>: this rank's gradients summed with every other rank's by
/// ncclAllReduce on its stream; the communicator is built from rank 0's unique id, sent over MPI.
template <>
class device::RankAllReduce<Nccl, Cuda> {
 public:
  RankAllReduce(MpiCommunicator& mpi, CudaContext& ctx) {
    ncclUniqueId id{};
    if (mpi.rank() == 0) COHORT_CUDA_CHECK(ncclGetUniqueId(&id), ctx.device);
    mpi.broadcast(&id, sizeof id, 0, "the broadcast of the NCCL unique id");
    COHORT_CUDA_CHECK(ncclCommInitRank(&comm_, mpi.size(), id, mpi.rank()), ctx.device);
  }
  RankAllReduce(const RankAllReduce&) = delete;
  RankAllReduce& operator=(const RankAllReduce&) = delete;
  ~RankAllReduce() {
    if (comm_) ncclCommDestroy(comm_); // no throwing from a destructor
  }
  void sum(MpiCommunicator&, CudaContext& ctx, float* grads, std::size_t n) {
    COHORT_CUDA_CHECK(ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, comm_, ctx.stream), ctx.device);
  }

 private:
  ncclComm_t comm_ = nullptr;
};

} // namespace cohort
