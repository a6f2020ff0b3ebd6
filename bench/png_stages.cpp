// Per-image cost of ImageFolder's stages on small PNGs (issue 34), one core, idle machine:
//   build/bench/png_stages /tmp/cohort_image_bench/fmnist_png/train
// read_file_into, decode_image, and for scale zlib's inflate of each file's (single) IDAT on one
// reused stream: the floor that libpng's per-image work sits on. Up to 20,000 files, 3 passes.
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <cohort/data/image_decode.hpp>

#include "bench_common.hpp"
namespace fs = std::filesystem;
int main(int argc, char** argv) {
  cohort::bench::refuse_compile_only_build("png_stages");
  if (argc < 2) {
    std::fprintf(stderr, "usage: png_stages <folder of PNGs>\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (auto& d : fs::recursive_directory_iterator(argv[1]))
    if (d.is_regular_file()) files.push_back(d.path());
  std::sort(files.begin(), files.end());
  files.resize(std::min<std::size_t>(files.size(), 20000));
  std::vector<std::vector<std::uint8_t>> all(files.size());
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto us = [&](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count() / files.size(); };
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::uint8_t> buf;
    auto t0 = now();
    std::size_t sum = 0;
    for (auto& f : files) {
      cohort::read_file_into(f, buf);
      sum += buf.size();
    }
    auto t1 = now();
    for (std::size_t i = 0; i < files.size(); ++i) cohort::read_file_into(files[i], all[i]);
    auto t2 = now();
    for (auto& b : all) {
      auto im = cohort::decode_image(b, 1, "x");
      sum += im.pixels[0];
    }
    auto t3 = now();
    z_stream z{};
    inflateInit(&z);
    std::vector<std::uint8_t> out(28 * 29 + 64);
    for (auto& b : all) {
      // IDAT chunks (assume one) after the 8-byte signature.
      std::size_t at = 8;
      while (at + 8 <= b.size()) {
        std::uint32_t len = b[at] << 24 | b[at + 1] << 16 | b[at + 2] << 8 | b[at + 3];
        if (std::memcmp(&b[at + 4], "IDAT", 4) == 0) {
          inflateReset(&z);
          z.next_in = &b[at + 8];
          z.avail_in = len;
          z.next_out = out.data();
          z.avail_out = out.size();
          inflate(&z, Z_FINISH);
          sum += out[5];
        }
        at += 12 + len;
      }
    }
    inflateEnd(&z);
    auto t4 = now();
    std::printf("read %.2f us  decode_image %.2f us  inflate(reused stream) %.2f us  (%zu files, %zu)\n", us(t0, t1),
                us(t2, t3), us(t3, t4), files.size(), sum % 7);
  }
}
