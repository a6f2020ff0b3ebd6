#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <zlib.h>

#include <cohort/data/idx.hpp>

#include "support/idx_bytes.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::Bytes;
using test::idx_bytes;
using test::pattern;
using test::save_bytes;
using test::TempDir;

/// gzip-compresses in memory (deflate with a gzip wrapper: windowBits 15 + 16).
Bytes gzip(const Bytes& in) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&zs, uLong(in.size())) + 64);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = uInt(in.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

const Bytes images_data = pattern(3 * 4 * 5);
const Bytes images_file = idx_bytes(idx_images_magic, {3, 4, 5}, images_data);

/// Expects parse_idx to throw FormatError whose message starts with the name and contains `fragment`.
void check_rejected(Bytes bytes, std::uint32_t magic, const std::string& fragment) {
  try {
    parse_idx("bad.idx", std::move(bytes), magic);
    FAIL("accepted, expected: " << fragment);
  } catch (const FormatError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).rfind("bad.idx: ", 0) == 0);
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

/// parse_idx either succeeds with consistent sizes or throws cohort::IoError / FormatError.
bool reads_or_rejects_cleanly(Bytes bytes, std::uint32_t magic) {
  try {
    const auto a = parse_idx("fuzz.idx", std::move(bytes), magic);
    std::size_t n = 1;
    for (auto d : a.dims) n *= d;
    CHECK(a.values.size() == n);
    return true;
  } catch (const IoError&) { // FormatError included
    return false;
  } catch (const std::exception& e) {
    FAIL("unexpected exception type: " << e.what());
  }
  return false;
}
} // namespace

TEST_CASE("IDX: reads raw and gzip-compressed images and labels") {
  TempDir dir("cohort_test_idx_");
  const Bytes labels_data{3, 1, 4};
  const Bytes labels_file = idx_bytes(idx_labels_magic, {3}, labels_data);
  save_bytes(dir.path / "images", images_file);
  save_bytes(dir.path / "images.gz", gzip(images_file));
  save_bytes(dir.path / "labels.gz", gzip(labels_file));

  for (const char* name : {"images", "images.gz"}) {
    const auto a = read_idx(dir.path / name, idx_images_magic);
    CHECK(a.path == dir.path / name);
    CHECK(a.dims == std::vector<std::size_t>{3, 4, 5});
    CHECK(a.values == images_data);
  }
  const auto l = read_idx(dir.path / "labels.gz", idx_labels_magic);
  CHECK(l.dims == std::vector<std::size_t>{3});
  CHECK(l.values == labels_data);

  // zlib's own gz* writer (what `gzip` produces, with a file name in the header).
  gzFile gz = gzopen((dir.path / "gzwrite.gz").c_str(), "wb9");
  REQUIRE(gz != nullptr);
  REQUIRE(gzwrite(gz, images_file.data(), unsigned(images_file.size())) == int(images_file.size()));
  REQUIRE(gzclose(gz) == Z_OK);
  CHECK(read_idx(dir.path / "gzwrite.gz", idx_images_magic).values == images_data);

  // Concatenated gzip members decompress to the concatenation, as with gunzip.
  const Bytes head(images_file.begin(), images_file.begin() + 30), tail(images_file.begin() + 30, images_file.end());
  Bytes two = gzip(head);
  const Bytes second = gzip(tail);
  two.insert(two.end(), second.begin(), second.end());
  CHECK(parse_idx("two.gz", two, idx_images_magic).values == images_data);
}

TEST_CASE("IDX: a wrong magic names what was expected and what was found") {
  const auto labels = idx_bytes(idx_labels_magic, {3}, {1, 2, 3});
  check_rejected(labels, idx_images_magic,
                 "expected magic 2051 (IDX images: unsigned bytes, 3 dimensions), found 2049 (IDX labels: unsigned "
                 "bytes, 1 dimension)");
  check_rejected(gzip(labels), idx_images_magic, "found 2049 (IDX labels");
  check_rejected(images_file, idx_labels_magic,
                 "expected magic 2049 (IDX labels: unsigned bytes, 1 dimension), found 2051");
  check_rejected(idx_bytes(0x00000D03, {1, 1, 1}, Bytes(4)), idx_images_magic, "found 3331 (IDX floats, 3 dimensions)");
  check_rejected(Bytes{'P', 'K', 3, 4, 0, 0, 0, 0}, idx_images_magic, "(0x504B0304: not an IDX file");
  // A magic of another element type is the caller's mistake, not the file's.
  CHECK_THROWS_WITH_AS(parse_idx("x.idx", images_file, 0x00000D03), doctest::Contains("not an IDX magic of unsigned"),
                       ValueError);
}

TEST_CASE("IDX: truncated files and trailing bytes are FormatErrors stating both sizes") {
  Bytes cut(images_file.begin(), images_file.end() - 1);
  check_rejected(cut, idx_images_magic,
                 "truncated: the header promises 3x4x5 = 60 bytes of data after 16 header bytes, the file has 59");
  check_rejected(gzip(Bytes(images_file.begin(), images_file.end() - 10)), idx_images_magic,
                 "truncated: the header promises 3x4x5 = 60 bytes of data after 16 header bytes, the file has 50 "
                 "(decompressed)");
  Bytes extra = images_file;
  extra.push_back(0);
  check_rejected(extra, idx_images_magic,
                 "trailing data: the header promises 3x4x5 = 60 bytes of data after 16 "
                 "header bytes, the file has 61");
  check_rejected(gzip(extra), idx_images_magic, "the file has 61 (decompressed)");
  check_rejected(idx_bytes(idx_labels_magic, {3}, {1, 2}), idx_labels_magic,
                 "truncated: the header promises 3 bytes of data after 8 header bytes, the file has 2");
  check_rejected(Bytes(images_file.begin(), images_file.begin() + 10), idx_images_magic,
                 "truncated: file has 10 bytes, the IDX header of 3 dimensions needs 16");
  check_rejected(Bytes{0, 0}, idx_images_magic, "file is 2 bytes, too short for the 4-byte IDX magic");
  check_rejected(Bytes{}, idx_images_magic, "file is 0 bytes");
  check_rejected(gzip(Bytes{0, 0, 8}), idx_images_magic, "file is 3 bytes (decompressed), too short");
}

TEST_CASE("IDX: zero and implausibly large dimensions are FormatErrors") {
  check_rejected(idx_bytes(idx_images_magic, {3, 0, 5}, {}), idx_images_magic,
                 "header dimensions 3x0x5: dimension 2 is 0, every dimension must be at least 1");
  check_rejected(idx_bytes(idx_labels_magic, {0}, {}), idx_labels_magic, "dimension 1 is 0");
  check_rejected(idx_bytes(idx_images_magic, {65536, 65536, 1}, Bytes(16)), idx_images_magic,
                 "header dimensions 65536x65536x1 promise more than 2147483648 bytes of data");
  // Products that would overflow 64 bits are caught before they do.
  check_rejected(idx_bytes(idx_images_magic, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}), idx_images_magic,
                 "promise more than 2147483648 bytes");
  check_rejected(gzip(idx_bytes(idx_images_magic, {0xFFFFFFFF, 2, 2}, {})), idx_images_magic,
                 "promise more than 2147483648 bytes");
  // The largest accepted size is fine as a header (the data is then simply missing).
  check_rejected(idx_bytes(idx_images_magic, {32768, 256, 256}, {}), idx_images_magic,
                 "the header promises 32768x256x256 = 2147483648 bytes of data after 16 header bytes, the file has 0");
}

TEST_CASE("IDX: corrupt gzip data names zlib's message") {
  const Bytes gz = gzip(images_file);
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF; // first byte of the CRC-32 trailer
  check_rejected(bad_crc, idx_images_magic, "corrupt gzip data (zlib: incorrect data check)");
  Bytes bad_len = gz;
  bad_len[bad_len.size() - 1] ^= 0x01; // ISIZE trailer
  check_rejected(bad_len, idx_images_magic, "corrupt gzip data (zlib: incorrect length check)");
  Bytes bad_method = gz;
  bad_method[2] = 7; // compression method other than deflate
  check_rejected(bad_method, idx_images_magic, "corrupt gzip data (zlib: unknown compression method)");
  check_rejected(Bytes(gz.begin(), gz.end() - 3), idx_images_magic,
                 "truncated gzip stream: the input ends before the end of the compressed data (76 bytes decompressed, "
                 "the IDX header promises 76 in all)");
  Bytes garbage = gz;
  garbage.push_back(0);
  garbage.push_back(7);
  check_rejected(garbage, idx_images_magic, "gzip: 2 bytes of trailing garbage after the end of the compressed data");
}

TEST_CASE("IDX: decompression stops once the output outgrows the header's promise") {
  // 16 MiB of zeros after a header promising 8 bytes: about 16 KiB compressed.
  Bytes bomb = idx_bytes(idx_images_magic, {2, 2, 2}, Bytes(std::size_t(16) << 20));
  const Bytes gz = gzip(bomb);
  CHECK(gz.size() < 100000);
  check_rejected(gz, idx_images_magic,
                 "trailing data: the header promises 2x2x2 = 8 bytes of data after 16 header "
                 "bytes, the file has at least ");
  check_rejected(gz, idx_images_magic, "(decompressed; stopped reading there)");
}

TEST_CASE("IDX: missing files and directories are IoErrors") {
  TempDir dir("cohort_test_idx_");
  CHECK_THROWS_WITH_AS(read_idx(dir.path / "missing.gz", idx_images_magic),
                       doctest::Contains("missing.gz: cannot open for reading"), IoError);
  CHECK_THROWS_AS(read_idx(dir.path, idx_images_magic), IoError);
  try {
    read_idx(dir.path / "missing", idx_labels_magic);
  } catch (const FormatError&) {
    FAIL("a missing file is not a format problem");
  } catch (const IoError&) {
  }
}

TEST_CASE("IDX: every truncation and thousands of random corruptions read or throw IoError or FormatError") {
  const Bytes labels_file = idx_bytes(idx_labels_magic, {7}, {0, 1, 2, 3, 4, 5, 6});
  const Bytes gz = gzip(images_file);
  struct Case {
    const Bytes* good;
    std::uint32_t magic;
  };
  const Bytes labels_gz = gzip(labels_file);
  const Case cases[] = {{&images_file, idx_images_magic},
                        {&gz, idx_images_magic},
                        {&labels_file, idx_labels_magic},
                        {&labels_gz, idx_labels_magic}};
  std::mt19937 gen(20240611); // fixed: the test is deterministic
  for (const auto& c : cases) {
    CHECK(reads_or_rejects_cleanly(*c.good, c.magic));
    for (std::size_t n = 0; n < c.good->size(); ++n)
      CHECK_FALSE(reads_or_rejects_cleanly(Bytes(c.good->begin(), c.good->begin() + std::ptrdiff_t(n)), c.magic));
    std::size_t rejected = 0;
    for (int trial = 0; trial < 2000; ++trial) {
      Bytes bad = *c.good;
      const int flips = 1 + int(gen() % 4);
      for (int i = 0; i < flips; ++i) bad[gen() % bad.size()] ^= std::uint8_t(1 + gen() % 255);
      if (gen() % 4 == 0) bad.resize(gen() % (bad.size() + 8), std::uint8_t(gen())); // cut or extend too
      if (!reads_or_rejects_cleanly(std::move(bad), c.magic)) ++rejected;
    }
    CHECK(rejected > 0);
  }
}
