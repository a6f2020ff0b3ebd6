#pragma once
/// \file
/// What every ProcessGroupDDP engine (CPU and device, train/engine/process_group_ddp*.hpp) does
/// over MPI besides gradients: checks the launch environment, agrees on the settings across
/// ranks, and broadcasts rank 0's model, buffers and checkpoint outcome.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/parallel/gradient_compression.hpp"
#include "cohort/parallel/mpi_communicator.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/parallel/signature.hpp"

namespace cohort::detail {

/// Environment variables other launchers set for the rank and world size (torchrun, OpenMPI,
/// MPICH/PMI): when present they must agree with MPI, or processes would train on the wrong
/// shards.
inline void check_launch_environment(const MpiCommunicator& comm) {
  struct Var {
    const char* name;
    int expected;
  };
  const Var vars[] = {{"RANK", comm.rank()},
                      {"WORLD_SIZE", comm.size()},
                      {"LOCAL_RANK", comm.local_rank()},
                      {"OMPI_COMM_WORLD_RANK", comm.rank()},
                      {"OMPI_COMM_WORLD_SIZE", comm.size()},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", comm.local_rank()},
                      {"PMI_RANK", comm.rank()},
                      {"PMI_SIZE", comm.size()}};
  for (const Var& v : vars) {
    const char* text = std::getenv(v.name);
    if (!text) continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value != v.expected)
      throw DistributedError(concat("rank ", comm.rank(), " (", comm.host(), "): the environment has ", v.name, "=\"",
                                    text, "\" but MPI reports ", v.expected, " (MPI_COMM_WORLD has ", comm.size(),
                                    " ranks); start every rank with the same launcher (mpirun -np N)"));
  }
}

/// Every rank must train the same thing: `lines` (network signature, policies, settings) are
/// compared across ranks by hash, then by text; on a difference every rank throws the same
/// DistributedError naming the differing ranks and the first differing line, so nobody is left
/// waiting.
inline void agree_across_ranks(MpiCommunicator& comm, const std::vector<std::string>& lines) {
  const std::size_t rank = std::size_t(comm.rank()), world = std::size_t(comm.size());
  const std::string text = join_lines(lines);
  const auto hashes = comm.allgather(fnv1a(text), "the comparison of the ranks' networks");
  std::vector<std::size_t> differ;
  for (std::size_t p = 1; p < world; ++p)
    if (hashes[p] != hashes[0]) differ.push_back(p);
  if (differ.empty()) return;
  const auto texts = comm.allgather_text(text, "the comparison of the ranks' networks");
  std::string ranks;
  for (std::size_t p : differ) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
  throw DistributedError(concat(
      "rank ", rank, ": the ranks do not train the same thing: rank(s) ", ranks,
      " differ from rank 0; first difference: ", signature_difference(texts[0], texts[differ[0]], 0, differ[0])));
}

/// Rank 0's running statistics and counters of `p` (host memory) to every rank.
/// What every rank must share, as the lines agree_across_ranks compares: the network, the
/// policies (`parallel` names the engine's), the optimiser, the data-parallel settings and `extra`
/// (the Trainer's).
template <class Net, class Precision, class Opt>
std::vector<std::string> ddp_agreement_lines(std::string_view parallel, const Opt& opt, const DataParallelOptions& o,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> lines = network_signature<Net>();
  lines.push_back(concat("parallel: ", parallel));
  lines.push_back(concat("precision: ", Precision::name));
  lines.push_back(concat("optimizer: ", optimizer_name(opt)));
  lines.push_back(concat("deterministic: ", o.deterministic ? "on" : "off", ", chunks ", o.deterministic_chunks));
  lines.push_back(concat("bucket_kib: ", o.bucket_kib));
  lines.push_back(concat("compression: ", compression_name(o.compression), o.error_feedback ? ", error feedback" : ""));
  lines.insert(lines.end(), extra.begin(), extra.end());
  return lines;
}

template <class P>
void broadcast_buffers(MpiCommunicator& comm, P& p) {
  if (p.buffers.size())
    comm.broadcast(p.buffers.data(), p.buffers.size() * sizeof(p.buffers[0]), 0,
                   "the broadcast of rank 0's running statistics");
  if (p.counters.size())
    comm.broadcast(p.counters.data(), p.counters.size() * sizeof(std::int64_t), 0,
                   "the broadcast of rank 0's counters");
}

/// Rank 0's float parameters, running statistics, counters and optimiser state (slots and step
/// count), all in host memory, to every rank.
template <class P, class O>
void broadcast_host_model(MpiCommunicator& comm, P& params, O& opt, const char* what) {
  comm.broadcast(params.values.data(), params.values.size() * sizeof(float), 0, concat("the broadcast of ", what));
  broadcast_buffers(comm, params);
  for (auto& slot : opt.slots(params.values.size()))
    comm.broadcast(slot.values.data(), slot.values.size() * sizeof(float), 0,
                   concat("the broadcast of rank 0's optimiser state (", slot.name, ")"));
  std::uint64_t steps = opt.steps();
  comm.broadcast(&steps, sizeof steps, 0, "the broadcast of rank 0's optimiser step count");
  opt.set_steps(steps);
}

/// Rank 0's checkpoint outcome to every rank: its error (empty: none) and, without one, its
/// trainer state. Returns whether rank 0's model follows (no error).
template <class State>
bool share_root_outcome(MpiCommunicator& comm, std::string& error, State& state) {
  std::uint64_t length = error.size();
  comm.broadcast(&length, sizeof length, 0, "the broadcast of rank 0's checkpoint outcome");
  error.resize(length);
  comm.broadcast(error.data(), length, 0, "the broadcast of rank 0's checkpoint outcome");
  if (!error.empty()) return false;
  static_assert(std::is_trivially_copyable_v<State>);
  comm.broadcast(&state, sizeof state, 0, "the broadcast of rank 0's trainer state");
  return true;
}

} // namespace cohort::detail
