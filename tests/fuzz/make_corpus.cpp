// Writes the seed corpus of the fuzz targets (committed under tests/fuzz/corpus/):
//   make_corpus <corpus dir>
// idx/: raw and gzip IDX files (images and labels, a two-member gzip, a truncated one);
// idx_gzip/: the level byte followed by raw IDX content (fuzz_idx_gzip.cpp compresses it);
// safetensors/: a checkpoint and a weights file of the fuzz network, each with and without
// cohort's checksums, and a header-only file.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <zlib.h>

#include <cohort/data/idx.hpp>

#include "fuzz_network.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {
void put(const fs::path& p, const Bytes& b) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
Bytes get(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
Bytes idx(std::uint32_t magic, const std::vector<std::uint32_t>& dims) {
  Bytes b;
  auto be32 = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
  };
  be32(magic);
  std::size_t n = 1;
  for (auto d : dims) {
    be32(d);
    n *= d;
  }
  for (std::size_t i = 0; i < n; ++i) b.push_back(std::uint8_t(i * 37 % 251));
  return b;
}
Bytes gzip(const Bytes& in) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, uLong(in.size())) + 32);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = uInt(in.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}
/// The safetensors file at `path` with every cohort.crc32c* entry cut out of its header, as if
/// written by Python's safetensors: loaded unchecked, so the fuzzer can reach the loaders with
/// mutated tensors and metadata.
Bytes without_checksums(const fs::path& path) {
  const Bytes file = get(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[std::size_t(i)];
  std::string h(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(n));
  h = std::regex_replace(h, std::regex(R"("cohort\.crc32c[^"]*":"[0-9a-f]{8}",?)"), "");
  while (h.size() % 8) h += ' ';
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = std::uint8_t((std::uint64_t(h.size()) >> (8 * i)) & 0xFF);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), file.begin() + 8 + std::ptrdiff_t(n), file.end());
  return out;
}
} // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const fs::path root = argv[1];

  const Bytes images = idx(cohort::idx_images_magic, {2, 3, 4}), labels = idx(cohort::idx_labels_magic, {5});
  put(root / "idx/images.idx", images);
  put(root / "idx/labels.idx", labels);
  put(root / "idx/images.idx.gz", gzip(images));
  put(root / "idx/labels.idx.gz", gzip(labels));
  Bytes two = gzip(Bytes(images.begin(), images.begin() + 10));
  const Bytes rest = gzip(Bytes(images.begin() + 10, images.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  put(root / "idx/two_members.idx.gz", two);
  const Bytes gz = gzip(labels);
  put(root / "idx/truncated.idx.gz", Bytes(gz.begin(), gz.end() - 5));
  for (const auto& [name, content] : {std::pair{"images", images}, std::pair{"labels", labels}}) {
    Bytes seed{std::uint8_t(6)};
    seed.insert(seed.end(), content.begin(), content.end());
    put(root / "idx_gzip" / name, seed);
  }

  cohort::fuzz::FuzzParams p;
  p.initialize(3);
  cohort::Adam<> opt({.lr = 1e-3});
  const fs::path st = root / "safetensors";
  fs::create_directories(st);
  cohort::save_checkpoint(st / "checkpoint", p, opt, cohort::TrainerState{.step = 2, .batch_size = 4, .seed = 3});
  cohort::save_weights(st / "weights", p);
  put(st / "checkpoint_unchecked", without_checksums(st / "checkpoint"));
  put(st / "weights_unchecked", without_checksums(st / "weights"));
  const std::string empty = "{}      ";
  Bytes header_only{8, 0, 0, 0, 0, 0, 0, 0};
  header_only.insert(header_only.end(), empty.begin(), empty.end());
  put(st / "empty", header_only);
  return 0;
}
