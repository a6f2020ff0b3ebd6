#pragma once
/// \file
/// MPI support: the ProcessGroupDDP<Mpi> engine and the communicator under it. Needs an MPI
/// implementation (OpenMPI, MPICH): link the `cohort::mpi` CMake target.
///
///     #include <cohort/cohort.hpp>
///     #include <cohort/mpi.hpp>
///     int main(int argc, char** argv) {
///       cohort::MpiSession mpi(argc, argv);
///       cohort::Trainer<Net, cohort::Sgd<>, cohort::ProcessGroupDDP<cohort::Mpi>> trainer(opt, options);
///       ...
///     }
///     // mpirun -np 4 ./train            (one node)
///     // mpirun -np 8 --hostfile hosts ./train   (hosts: "node0 slots=4\nnode1 slots=4")

#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/parallel/process_group_ddp.hpp"
#include "cohort/train/engine/process_group_ddp.hpp"
#include "cohort/train/engine/process_group_ddp_on_device.hpp"
