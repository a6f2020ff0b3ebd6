// Two NCCL ranks on one GPU, without MPI: the gradient all-reduce of ProcessGroupDDP<Nccl, Cuda>
// (gpu::BucketedAllReduce over gpu::NcclComm, the watchdog of parallel/collective_watchdog.hpp)
// between two processes, checked bit for bit against the reduction one process computes.
// scripts/gpu-check.sh runs it (stage nccl_two_ranks); CI only compiles it.
//
//     NCCL_HOSTID=cohort-rank0 nccl_two_ranks --rank 0 --dir D --case allreduce &
//     NCCL_HOSTID=cohort-rank1 nccl_two_ranks --rank 1 --dir D --case allreduce; wait
//
// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"); ranks with distinct
// NCCL_HOSTID values count as separate hosts and talk over sockets: a real two-rank communicator.
// The bootstrap is a directory both ranks see: rank 0 writes NCCL's unique id into it (written
// to a temporary name, then renamed: the reader never sees half of it), each rank its pid, which
// the other's watchdog polls: a peer that dies is named instead of waited for.
//
// Cases:
//   allreduce   1,000,003 floats in buckets of 64 Ki elements: every element must equal the sum
//               the host computes from both ranks' values (a + b: one rounding, either order).
//   bf16, fp16  the same through compressed buckets: each rank's values rounded to the wire
//               format, NCCL's sum rounded to it again, widened back (device/gradient_packing.hpp).
//   watchdog    rank 1 queues its first bucket and dies (SIGKILL); rank 0 must fail within
//               --timeout with cohort's DistributedError naming rank 1, not hang.
// Prints one JSON line per rank; exit 0 when the case holds.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <cohort/parallel/nccl.cuh>

namespace {

using namespace cohort;
using Clock = std::chrono::steady_clock;

struct Args {
  int rank = -1, device = 0;
  std::filesystem::path dir;
  std::string test_case = "allreduce";
  double timeout_s = 60;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --rank 0|1 --dir DIR [--case allreduce|bf16|fp16|watchdog] [--timeout S] [--device I]\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--rank")
      a.rank = std::atoi(v);
    else if (k == "--dir")
      a.dir = v;
    else if (k == "--case")
      a.test_case = v;
    else if (k == "--timeout")
      a.timeout_s = std::atof(v);
    else if (k == "--device")
      a.device = std::atoi(v);
    else
      usage(argv[0]);
  }
  if ((argc - 1) % 2 || (a.rank != 0 && a.rank != 1) || a.dir.empty() || a.timeout_s <= 0) usage(argv[0]);
  if (a.test_case != "allreduce" && a.test_case != "bf16" && a.test_case != "fp16" && a.test_case != "watchdog")
    usage(argv[0]);
  return a;
}

/// The rendezvous directory: files written whole (temporary name, then rename) and polled.
void write_file(const std::filesystem::path& path, const void* data, std::size_t n) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), std::streamsize(n));
    if (!out) throw IoError("nccl_two_ranks: cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}
std::vector<char> wait_for_file(const std::filesystem::path& path, std::size_t n, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> data(n);
    if (in && in.read(data.data(), std::streamsize(n)) && std::size_t(in.gcount()) == n) return data;
    if (Clock::now() > deadline)
      throw DistributedError(detail::concat("nccl_two_ranks: ", path.string(), " did not appear within ", timeout_s,
                                            " s: the other rank did not start"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Rank `rank`'s gradient element i: deterministic, of mixed signs and magnitudes (2^-12..2^6),
/// so that sums round.
float value(int rank, std::size_t i) {
  const std::uint32_t h = std::uint32_t(i) * 2654435761u ^ std::uint32_t(rank + 1) * 40503u;
  const float mantissa = float(h % 1000003u) / 1000003.0f - 0.5f;
  return std::ldexp(mantissa, int(h >> 28) - 8);
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

int run(const Args& a) {
  COHORT_CUDA_CHECK(cudaSetDevice(a.device), a.device);
  std::filesystem::create_directories(a.dir);
  const int peer = 1 - a.rank;
  const pid_t own_pid = getpid();
  write_file(a.dir / detail::concat("pid.", a.rank), &own_pid, sizeof own_pid);
  ncclUniqueId id{};
  if (a.rank == 0) {
    gpu::detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId", a.device);
    write_file(a.dir / "nccl_id", &id, sizeof id);
  } else {
    const auto data = wait_for_file(a.dir / "nccl_id", sizeof id, a.timeout_s);
    std::memcpy(&id, data.data(), sizeof id);
  }
  pid_t peer_pid = 0;
  std::memcpy(&peer_pid, wait_for_file(a.dir / detail::concat("pid.", peer), sizeof peer_pid, a.timeout_s).data(),
              sizeof peer_pid);

  const char* host_id = std::getenv("NCCL_HOSTID");
  const std::string who =
      detail::concat("rank ", a.rank, " of 2 (GPU ", a.device, ", NCCL_HOSTID ", host_id ? host_id : "unset", ")");
  // The watchdog, as ProcessGroupDDP's (MpiCommunicator::wait_until and fail): a deadline, the
  // peer's liveness (its pid: gone, or a zombie its launcher has not reaped yet), and a failure
  // message that names the peer when it has exited, whoever noticed first (NCCL's own error on
  // the closed socket, or this poll).
  auto peer_gone = [&] {
    if (kill(peer_pid, 0) != 0) return errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(peer_pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'Z' || text[close + 2] == 'X');
  };
  auto peer_note = [&] {
    return peer_gone() ? detail::concat("; rank ", peer, " (pid ", peer_pid, ") has exited") : std::string();
  };
  auto watch = [&](gpu::NcclOperation& op, const std::string& what) {
    watch_collective_with(
        op, what,
        [&](auto&& done) {
          const auto deadline = Clock::now() + std::chrono::duration<double>(a.timeout_s);
          for (std::uint64_t spins = 0; !done(); ++spins) {
            if (spins % 200 == 0 && peer_gone())
              throw DistributedError(
                  detail::concat(who, ": rank ", peer, " (pid ", peer_pid, ") exited during ", what));
            if (Clock::now() > deadline)
              throw DistributedError(
                  detail::concat(who, ": ", what, " did not complete within ", a.timeout_s, " s", peer_note()));
            std::this_thread::sleep_for(std::chrono::microseconds(50));
          }
        },
        [&](const std::string& m) { throw DistributedError(detail::concat(who, ": ", m, peer_note())); });
  };

  gpu::NcclComm comm(a.device, a.timeout_s);
  ncclConfig_t cfg = gpu::detail::non_blocking_config();
  const ncclResult_t created = ncclCommInitRankConfig(comm.out(), 2, id, a.rank, &cfg);
  gpu::NcclOperation creation(comm, nullptr, created == ncclInProgress ? ncclSuccess : created);
  watch(creation, "the creation of the NCCL communicator");

  constexpr std::size_t n = 1'000'003, bucket = 64 * 1024;
  std::vector<GradientBucket> buckets;
  for (std::size_t b = 0; b < n; b += bucket) buckets.push_back({.begin = b, .end = std::min(n, b + bucket)});
  const GradientCompression format = a.test_case == "bf16"   ? GradientCompression::bf16
                                     : a.test_case == "fp16" ? GradientCompression::fp16
                                                             : GradientCompression::none;
  std::vector<float> mine(n), expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    mine[i] = value(a.rank, i);
    const float x = value(0, i), y = value(1, i);
    if (format == GradientCompression::none) {
      expected[i] = x + y;
    } else { // each rank's value on the wire, their float sum rounded to the wire, widened
      const float wx = detail::from_wire(format, detail::pack_gradient(format, x, nullptr));
      const float wy = detail::from_wire(format, detail::pack_gradient(format, y, nullptr));
      expected[i] = detail::from_wire(format, detail::pack_gradient(format, wx + wy, nullptr));
    }
  }
  DeviceBuffer<float> grads;
  grads.assign_from_host(mine.data(), n);
  gpu::Stream compute(a.device);
  gpu::BucketedAllReduce reduce(comm, buckets, {.format = format});
  reduce.begin(grads.data());
  const auto t0 = Clock::now();
  if (a.test_case == "watchdog") {
    reduce.start(compute.get(), 0, watch);
    if (a.rank == 1) {
      std::printf("{\"case\": \"watchdog\", \"rank\": 1, \"note\": \"queued bucket 0, now killing itself\"}\n");
      std::fflush(stdout);
      raise(SIGKILL);
    }
    try {
      for (std::size_t b = 1; b < buckets.size(); ++b) reduce.start(compute.get(), b, watch);
      reduce.finish(compute.get(), watch);
    } catch (const DistributedError& e) {
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const bool named = std::string_view(e.what()).find("rank 1") != std::string_view::npos;
      std::printf("{\"case\": \"watchdog\", \"rank\": 0, \"failed_after_s\": %.3f, \"names_rank_1\": %s, "
                  "\"within_deadline\": %s}\nerror: %s\n",
                  s, named ? "true" : "false", s <= a.timeout_s + 5 ? "true" : "false", e.what());
      return named && s <= a.timeout_s + 5 ? 0 : 1;
    }
    std::printf("{\"case\": \"watchdog\", \"rank\": 0, \"error\": \"the all-reduce completed without rank 1\"}\n");
    return 1;
  }
  for (std::size_t b = 0; b < buckets.size(); ++b) reduce.start(compute.get(), b, watch);
  reduce.finish(compute.get(), watch);
  COHORT_CUDA_CHECK(cudaStreamSynchronize(compute.get()), a.device);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::vector<float> got = grads.to_host();
  std::size_t mismatches = 0, first = n;
  for (std::size_t i = 0; i < n; ++i)
    if (bits(got[i]) != bits(expected[i]) && mismatches++ == 0) first = i;
  std::printf("{\"case\": \"%s\", \"rank\": %d, \"elements\": %zu, \"buckets\": %zu, \"ms\": %.3f, "
              "\"mismatches\": %zu",
              a.test_case.c_str(), a.rank, n, buckets.size(), ms, mismatches);
  if (mismatches)
    std::printf(", \"first_mismatch\": {\"index\": %zu, \"got\": %.9g, \"expected\": %.9g}", first, double(got[first]),
                double(expected[first]));
  std::printf("}\n");
  return mismatches == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::printf("{\"case\": \"%s\", \"rank\": %d, \"error\": \"see stderr\"}\n", a.test_case.c_str(), a.rank);
    std::fprintf(stderr, "nccl_two_ranks rank %d: %s\n", a.rank, e.what());
    return 1;
  }
}
