#pragma once
/// \file
/// ProcessGroupDDP's error-feedback residuals to and from a checkpoint (the layouts are in
/// train/error_feedback_state.hpp): rank 0 gathers every rank's residual before it saves, and
/// scatters the saved ones after it resumes. Both are collectives over the control-plane
/// communicator, with its deadline. Include it through <cohort/mpi.hpp>.
///
///     ErrorFeedbackState s = gather_error_feedback(comm, residual, slots, deterministic);  // save
///     scatter_error_feedback(comm, s, residual, slots, deterministic);                     // resume
///
/// `residual` is this rank's (`slots` rows of the store, one outside deterministic mode; in
/// deterministic mode slot k of rank r is chunk r + k * world, as DistributedSampler deals them).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/train/error_feedback_state.hpp"

namespace cohort::detail {

/// Chunk of slot k on rank r (deterministic mode): the one dealing the engine steps with and the
/// checkpoint's rows follow.
inline std::size_t chunk_of(std::size_t r, std::size_t k, std::size_t world) noexcept { return r + k * world; }

inline int mpi_float_count(std::size_t n, const char* what) {
  if (n > std::size_t(std::numeric_limits<int>::max()))
    throw ValueError(concat(what, ": ", n, " values per rank are more than one MPI message takes"));
  return int(n);
}

/// Every rank's residual at rank 0, in the checkpoint's layout (empty elsewhere, and everywhere
/// when `residual` is: no error feedback).
inline ErrorFeedbackState gather_error_feedback(MpiCommunicator& comm, std::span<const float> residual,
                                                std::size_t slots, bool deterministic) {
  ErrorFeedbackState s;
  if (residual.empty()) return s;
  const char* what = "the gather of the error-feedback residuals";
  const std::size_t world = std::size_t(comm.size()), rank = std::size_t(comm.rank()), n = residual.size() / slots;
  std::vector<float> all(rank == 0 ? residual.size() * world : 0);
  const int count = mpi_float_count(residual.size(), what);
  MPI_Request r;
  comm.check(MPI_Igather(residual.data(), count, MPI_FLOAT, all.data(), count, MPI_FLOAT, 0, comm.handle(), &r),
             "MPI_Igather", what);
  comm.started(what);
  comm.wait(r, what);
  if (rank != 0) return s;
  s.layout = deterministic ? ErrorFeedbackState::Layout::per_chunk : ErrorFeedbackState::Layout::per_rank;
  s.rows = world * slots, s.row_size = n;
  s.values.resize(all.size());
  for (std::size_t p = 0; p < world; ++p) // rank-major rows -> chunk order (the same when slots == 1)
    for (std::size_t k = 0; k < slots; ++k)
      std::copy_n(all.data() + (p * slots + k) * n, n,
                  s.values.data() + (deterministic ? chunk_of(p, k, world) : p * slots + k) * n);
  return s;
}

/// Rank 0's saved residuals (`s`, from the checkpoint) into every rank's `residual`: exactly when
/// the layout fits this run (its world size, or its chunk count in deterministic mode), else
/// zero. Nothing to do without error feedback (`residual` empty on every rank).
inline void scatter_error_feedback(MpiCommunicator& comm, const ErrorFeedbackState& s, std::span<float> residual,
                                   std::size_t slots, bool deterministic) {
  if (residual.empty()) return;
  const char* what = "the scatter of the error-feedback residuals";
  const std::size_t world = std::size_t(comm.size()), rank = std::size_t(comm.rank()), n = residual.size() / slots;
  std::uint64_t fits = 0;
  if (rank == 0)
    fits = s.layout == (deterministic ? ErrorFeedbackState::Layout::per_chunk : ErrorFeedbackState::Layout::per_rank) &&
           s.rows == world * slots && s.row_size == n && s.values.size() == s.rows * n;
  comm.broadcast(&fits, sizeof fits, 0, "the broadcast of whether the saved residuals fit");
  if (!fits) {
    std::fill(residual.begin(), residual.end(), 0.f);
    return;
  }
  std::vector<float> all(rank == 0 ? residual.size() * world : 0);
  if (rank == 0) // chunk order -> rank-major rows
    for (std::size_t p = 0; p < world; ++p)
      for (std::size_t k = 0; k < slots; ++k)
        std::copy_n(s.values.data() + (deterministic ? chunk_of(p, k, world) : p * slots + k) * n, n,
                    all.data() + (p * slots + k) * n);
  const int count = mpi_float_count(residual.size(), what);
  MPI_Request r;
  comm.check(MPI_Iscatter(all.data(), count, MPI_FLOAT, residual.data(), count, MPI_FLOAT, 0, comm.handle(), &r),
             "MPI_Iscatter", what);
  comm.started(what);
  comm.wait(r, what);
}

} // namespace cohort::detail
