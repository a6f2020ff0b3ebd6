#include <doctest/doctest.h>

// GCC 12's libstdc++ raises false -Warray-bounds / -Wrestrict reports inside vector<char> and
// string copies at -O3 (GCC PR 105329); nothing in this file indexes out of bounds.
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wrestrict"
#pragma GCC diagnostic ignored "-Wstringop-overread"

#include <filesystem>
#include <fstream>
#include <random>

#include <cohort/io/safetensors.hpp>

#include "support/fixtures.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("cohort_test_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<char> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<char> with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<char> b(8);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

void check_rejected(const std::string& header, std::size_t data_bytes, const std::string& fragment) {
  try {
    SafetensorsFile::parse("bad.safetensors", with_header(header, data_bytes));
    FAIL("accepted: " << header);
  } catch (const FormatError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("bad.safetensors: ") == 0);
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}
} // namespace

TEST_CASE("safetensors: round trip with metadata, names needing escapes, every dtype size") {
  TempDir dir;
  const std::vector<float> w{1.f, -2.f, 3.5f, 0.f, 1e-30f, 7.f};
  const std::vector<std::int64_t> count{42};
  const std::vector<double> d{3.14};
  SafetensorsWriter out;
  out.add<float>("0.weight", {2, 3}, w);
  out.add<std::int64_t>("1.num_batches_tracked", {}, count);
  out.add<double>("quote\"and\\slash", {1}, d);
  out.set_metadata("format", "pt");
  out.write(dir.path / "m.safetensors");

  const auto f = SafetensorsFile::read(dir.path / "m.safetensors");
  CHECK(f.entries().size() == 3);
  CHECK(f.values<float>("0.weight") == w);
  CHECK(f.at("0.weight").shape == std::vector<std::size_t>{2, 3});
  CHECK(f.values<std::int64_t>("1.num_batches_tracked") == count);
  CHECK(f.at("1.num_batches_tracked").shape.empty());
  CHECK(f.values<double>("quote\"and\\slash") == d);
  CHECK(f.metadata().at("format") == "pt");
  CHECK_THROWS_WITH_AS(f.values<double>("0.weight"),
                       doctest::Contains("tensor \"0.weight\" has dtype F32, expected F64"), FormatError);
  CHECK_THROWS_AS(f.at("missing"), FormatError);
  // The header is 8-byte aligned, as the reference writer pads it.
  const auto bytes = file_bytes(dir.path / "m.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[std::size_t(i)]);
  CHECK(n % 8 == 0);
}

TEST_CASE("safetensors: reads files written by Python's safetensors") {
  const auto f = cohort::test::fixture("layer_linear");
  CHECK(f.at("p.weight").shape == std::vector<std::size_t>{7, 12});
  CHECK(f.metadata().count("torch_version") == 1);
}

TEST_CASE("safetensors: malformed headers are FormatErrors that say what is wrong") {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK_NOTHROW(SafetensorsFile::parse("bad.safetensors", with_header(ok, 8)));
  check_rejected(ok, 4, "ends at byte 8 but the data section has 4 bytes");
  check_rejected(ok, 12, "tensors cover 8 bytes of data but the file has 12");
  check_rejected(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
                 "spans 8 bytes, but F32 x 3 elements need 12");
  check_rejected(R"({"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype \"X9\"");
  check_rejected(R"({"a":{"dtype":"F32","shape":[2]}})", 8, "no [begin, end] data_offsets");
  check_rejected(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8, "not valid JSON");
  check_rejected(R"([1,2])", 0, "not a JSON object");
  check_rejected(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12, "there is a gap");
  check_rejected(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "overlaps");
  check_rejected(R"({"__metadata__":{"k":1}})", 0, "is not a string");
  check_rejected(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "invalid dimension");
  CHECK_THROWS_WITH_AS(SafetensorsFile::parse("bad.safetensors", std::vector<char>(5)),
                       doctest::Contains("file is 5 bytes"), FormatError);
  auto huge = with_header(ok, 8);
  huge[7] = 0x7f;
  CHECK_THROWS_WITH_AS(SafetensorsFile::parse("bad.safetensors", huge), doctest::Contains("more than the limit"),
                       FormatError);
}

TEST_CASE("safetensors: every truncation and random corruption is rejected cleanly or read") {
  const auto good = file_bytes(fs::path(COHORT_FIXTURE_DIR) / "layer_linear.safetensors");
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<char> cut(good.begin(), good.begin() + std::ptrdiff_t(n));
    CHECK_THROWS_AS(SafetensorsFile::parse("cut.safetensors", std::move(cut)), FormatError);
  }
  std::mt19937 gen(1);
  std::size_t rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto bad = good;
    const int flips = 1 + int(gen() % 4);
    for (int i = 0; i < flips; ++i) bad[gen() % std::min<std::size_t>(bad.size(), 600)] ^= char(1 + gen() % 255);
    try {
      SafetensorsFile::parse("fuzz.safetensors", std::move(bad));
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 1000); // most header corruptions are detected; the rest hit tensor bytes only
}

TEST_CASE("safetensors: writes are atomic, a failed write leaves the old file") {
  TempDir dir;
  const fs::path p = dir.path / "ckpt.safetensors";
  const std::vector<float> a{1.f}, b{2.f};
  SafetensorsWriter w1;
  w1.add<float>("x", {1}, a);
  w1.write(p);
  SafetensorsWriter w2;
  w2.add<float>("x", {1}, b);
  CHECK_THROWS_AS(w2.write(dir.path / "no_such_dir" / "ckpt.safetensors"), IoError);
  w2.write(p);
  CHECK(SafetensorsFile::read(p).values<float>("x") == b);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 1); // no temporary left behind
  CHECK_THROWS_AS(SafetensorsFile::read(dir.path / "missing.safetensors"), IoError);
}
