// The depthwise convolution kernels (backend/cpu/depthwise_conv2d.hpp) against the memory
// bandwidth limit: a depthwise layer does K*K multiply-adds per element it reads, so its bound
// is bytes, not FMAs. For each shape, batch 128 (or --batch), the forward pass and the backward
// pass (input gradient, weight and bias gradients) are timed on --threads threads (median of
// --reps), their compulsory traffic counted (forward: read x, write y; backward: read x and dy,
// write dx), and set against a streaming triad (c = a + s * b over 3 x 128 MiB, the STREAM
// kernel) measured in the same process on the same threads. One JSON line per shape:
//
//   depthwise_conv [--threads 2] [--batch 128] [--reps 15]      (bench/depthwise_conv.py runs it)
//
// Tensors larger than the last-level cache run from DRAM; the small ones (Fashion-MNIST's 14x14
// and 7x7 stages) partly from cache, so their share can pass 100%: the table says which is which.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include <cohort/backend/cpu.hpp>

using namespace cohort;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_median(int reps, F&& f) {
  f(); // warm: first touch of the pages, the pool's threads awake
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

/// STREAM's triad on the pool's threads: bytes moved per second (two reads, one write).
double triad_bandwidth(CpuContext& ctx, int reps) {
  const std::size_t n = std::size_t(32) << 20; // 32 Mi floats = 128 MiB per array
  std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 0.f);
  float* pa = a.data();
  float* pb = b.data();
  float* pc = c.data();
  const double s = time_median(reps, [&] {
    ctx.threads().parallel_for(n, 1 << 16, [=](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) pc[i] = pa[i] + 3.f * pb[i];
    });
  });
  return 3.0 * double(n) * sizeof(float) / s;
}

template <std::size_t C, std::size_t H, std::size_t K, std::size_t S>
void measure(CpuContext& ctx, const char* name, std::size_t batch, int reps, double stream) {
  using G = Pool2dGeometry<C, H, H, K, S, K / 2>;
  using Kern = ops::DepthwiseConv2dKernels<Cpu>;
  std::vector<float> x(batch * G::in_size), y(batch * G::out_size), dy(batch * G::out_size, 0.25f),
      dx(batch * G::in_size), w(C * K * K, 0.1f), b(C, 0.f), dw(C * K * K), db(C);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.1f - 0.8f;
  const double fwd = time_median(reps, [&] { Kern::forward<G>(ctx, x.data(), w.data(), b.data(), y.data(), batch); });
  const ops::Conv2dBackwardArgs<float> args{
      .x = x.data(), .w = w.data(), .dy = dy.data(), .dx = dx.data(), .dw = dw.data(), .db = db.data(), .batch = batch};
  const double bwd = time_median(reps, [&] { Kern::backward<G>(ctx, args); });
  const double in_bytes = double(batch * G::in_size) * sizeof(float);
  const double out_bytes = double(batch * G::out_size) * sizeof(float);
  const double fwd_bw = (in_bytes + out_bytes) / fwd, bwd_bw = (2 * in_bytes + out_bytes) / bwd;
  std::printf(
      "{\"bench\": \"depthwise_conv\", \"side\": \"cohort\", \"shape\": \"%s\", \"channels\": %zu, \"size\": %zu, "
      "\"kernel\": %zu, \"stride\": %zu, \"batch\": %zu, \"threads\": %zu, \"forward_ms\": %.3f, "
      "\"backward_ms\": %.3f, \"forward_gbs\": %.2f, \"backward_gbs\": %.2f, \"stream_gbs\": %.2f, "
      "\"forward_share\": %.3f, \"backward_share\": %.3f, \"input_mib\": %.1f}\n",
      name, C, H, K, S, batch, ctx.threads().size(), fwd * 1e3, bwd * 1e3, fwd_bw * 1e-9, bwd_bw * 1e-9, stream * 1e-9,
      fwd_bw / stream, bwd_bw / stream, in_bytes / (1 << 20));
}
} // namespace

int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("depthwise_conv");
  std::size_t threads = 2, batch = 128;
  int reps = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads")
      threads = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--batch")
      batch = std::strtoul(argv[i + 1], nullptr, 10);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
  }
  set_num_threads(threads);
  CpuContext ctx;
  const double stream = triad_bandwidth(ctx, 5);
  // MobileNetV2's depthwise stages at 224x224 (batch / 4 samples: DRAM-sized tensors) ...
  measure<96, 112, 3, 2>(ctx, "mnv2 96@112 s2", batch / 4, reps, stream);
  measure<144, 56, 3, 1>(ctx, "mnv2 144@56", batch / 4, reps, stream);
  measure<192, 28, 3, 1>(ctx, "mnv2 192@28", batch / 4, reps, stream);
  // ... and a small one's for 28x28 inputs (Fashion-MNIST), batch samples.
  measure<96, 14, 3, 1>(ctx, "small 96@14", batch, reps, stream);
  measure<192, 7, 3, 1>(ctx, "small 192@7", batch, reps, stream);
  measure<96, 14, 5, 1>(ctx, "small 96@14 k5", batch, reps, stream);
  // MobileNetV2Small's strided stages (polyphase planes).
  measure<96, 28, 3, 2>(ctx, "small 96@28 s2", batch, reps, stream);
  measure<144, 14, 3, 2>(ctx, "small 144@14 s2", batch, reps, stream);
  measure<192, 7, 3, 2>(ctx, "small 192@7 s2", batch, reps, stream);
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  std::printf("{\"bench\": \"depthwise_conv\", \"side\": \"cohort\", \"peak_rss_mib\": %.1f}\n",
              double(r.ru_maxrss) / 1024);
}
