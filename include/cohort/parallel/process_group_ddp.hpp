#pragma once
/// \file
/// `ProcessGroupDDP<Mpi>`: torch's DistributedDataParallel, one process per rank.
/// Example (not compiled: needs MPI (tests/mpi/ddp_check.cpp builds it)):
///
///     #include <cohort/mpi.hpp>      // the engine; link cohort::mpi
///     cohort::Trainer<Net, cohort::Adam<>, cohort::ProcessGroupDDP<cohort::Mpi>> trainer(opt, options);
///     // mpirun -np 4 ./train   (or with a hostfile over several nodes)
///
/// Rank and world size come from the engine's communicator (MPI: MPI_COMM_WORLD). At start every
/// rank checks that all ranks built the same network, policies and settings, then takes rank 0's
/// parameters. Gradients are averaged in buckets started during backward; every rank applies
/// the same optimiser step. This header only names the policy: it needs no MPI.

#include <cstddef>
#include <string_view>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/parallel/policy.hpp"

namespace cohort {

/// The MPI process group (OpenMPI, MPICH): `#include <cohort/mpi.hpp>` for its engine.
struct Mpi {
  static constexpr std::string_view name = "Mpi";
};

/// NCCL between GPUs, bootstrapped over MPI as Horovod does (one process per GPU): defined by
/// cohort/parallel/nccl.cuh (nvcc, the cohort::nccl CMake target).
struct Nccl;

/// `ProcessGroupDDP<Comm = Mpi, Backend = Cpu>`: one process per rank over communicator Comm.
template <class Comm = Mpi, class Backend = Cpu>
struct ProcessGroupDDP {
  using backend = Backend;
  using communicator = Comm;
  static constexpr std::string_view name = "ProcessGroupDDP";
  /// Replicas in this process (the world size is known at run time).
  static constexpr std::size_t replicas = 1;
};

} // namespace cohort
