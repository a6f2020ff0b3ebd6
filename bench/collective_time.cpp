// The link's cost, as ProcessGroupDDP<Mpi> pays it: one gradient bucket all-reduced as an
// MPI_Ireduce_scatter then an MPI_Iallgatherv of floats (the CPU engine's float path), timed over
// a range of bucket sizes. bench/scaling_model.py fits alpha and beta to these times.
//
//   mpirun -np N collective_time [--sizes 4096,65536,...] [--reps 15]   # JSON lines on rank 0
//   collective_time --buckets                                           # models' buckets, no MPI
//
// --buckets prints, for models A, D and ResNet-20, the gradient buckets ProcessGroupDDP cuts
// (bucket_kib 1024, its default): their sizes in bytes and the layer whose backward completes
// each, which the model's overlap timeline needs.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <mpi.h>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/gradient_buckets.hpp>

using namespace cohort;

namespace {

template <class Net>
void print_buckets(const char* name) {
  const auto buckets = plan_buckets<Net>(std::size_t(1024) * 1024);
  std::printf("{\"model\": \"%s\", \"parameters\": %zu, \"buckets\": [", name,
              std::size_t(Net::layout.param_base[Net::layer_count]));
  for (std::size_t b = 0; b < buckets.size(); ++b)
    std::printf("%s{\"bytes\": %zu, \"first_layer\": %zu}", b ? ", " : "", buckets[b].size() * sizeof(float),
                buckets[b].first_layer);
  std::printf("]}\n");
}

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) {
    std::fprintf(stderr, "collective_time: %s failed (%d)\n", call, code);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/// Seconds for one bucket of `n` floats: reduce-scatter into each rank's share, all-gather the
/// shares back (ProcessGroupDDP's split: counts as even as possible, the first ranks one more).
double one_bucket(std::vector<float>& data, std::vector<float>& part, const std::vector<int>& counts,
                  const std::vector<int>& displs, int rank, MPI_Comm scatter, MPI_Comm gather) {
  MPI_Request r;
  const auto t0 = std::chrono::steady_clock::now();
  check(MPI_Ireduce_scatter(data.data(), part.data(), counts.data(), MPI_FLOAT, MPI_SUM, scatter, &r),
        "MPI_Ireduce_scatter");
  check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  check(MPI_Iallgatherv(part.data(), counts[std::size_t(rank)], MPI_FLOAT, data.data(), counts.data(), displs.data(),
                        MPI_FLOAT, gather, &r),
        "MPI_Iallgatherv");
  check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("collective_time");
  CLI::App app{"The time of one gradient bucket's all-reduce (reduce-scatter + all-gather), by size"};
  std::vector<std::size_t> sizes{4096, 16384, 65536, 262144, 1048576, 4194304};
  int reps = 15;
  bool buckets = false;
  app.add_option("--sizes", sizes, "bucket sizes in bytes")->delimiter(',');
  app.add_option("--reps", reps, "timed repetitions per size (after 3 untimed)")->check(CLI::Range(1, 100000));
  app.add_flag("--buckets", buckets, "print models A, D and ResNet-20's gradient buckets and exit (no MPI)");
  CLI11_PARSE(app, argc, argv);
  if (buckets) {
    print_buckets<models::ModelA>("A");
    print_buckets<models::ModelD>("D");
    print_buckets<models::ResNet20>("resnet");
    return 0;
  }

  check(MPI_Init(&argc, &argv), "MPI_Init");
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm scatter, gather; // two communicators, as the engine has (a gather may overlap the next scatter)
  MPI_Comm_dup(MPI_COMM_WORLD, &scatter);
  MPI_Comm_dup(MPI_COMM_WORLD, &gather);
  for (const std::size_t bytes : sizes) {
    const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(float));
    const std::size_t ranks = static_cast<std::size_t>(world);
    std::vector<int> counts(ranks), displs(ranks);
    for (int r = 0, at = 0; r < world; ++r) {
      counts[std::size_t(r)] = int(n / ranks + (std::size_t(r) < n % ranks ? 1 : 0));
      displs[std::size_t(r)] = at;
      at += counts[std::size_t(r)];
    }
    std::vector<float> data(n, 1.0f), part(std::size_t(counts[std::size_t(rank)]) + 1);
    std::vector<double> times;
    for (int i = 0; i < reps + 3; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t = one_bucket(data, part, counts, displs, rank, scatter, gather);
      double slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= 3) times.push_back(slowest);
      std::fill(data.begin(), data.end(), 1.0f); // the sums would overflow to inf after ~100 rounds
    }
    std::sort(times.begin(), times.end());
    if (rank == 0)
      std::printf("{\"world\": %d, \"bytes\": %zu, \"median_s\": %.9f, \"min_s\": %.9f, \"reps\": %d}\n", world,
                  n * sizeof(float), times[times.size() / 2], times.front(), reps);
    std::fflush(stdout);
  }
  MPI_Comm_free(&scatter);
  MPI_Comm_free(&gather);
  MPI_Finalize();
  return 0;
}
