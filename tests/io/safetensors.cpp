#include <doctest/doctest.h>

// GCC 12's libstdc++ raises false -Warray-bounds / -Wrestrict reports inside vector<char> and
// string copies at -O3 (GCC PR 105329); nothing in this file indexes out of bounds.
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wrestrict"
#pragma GCC diagnostic ignored "-Wstringop-overread"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include <cohort/io/safetensors.hpp>

#include "support/fixtures.hpp"
#include "support/safetensors_bytes.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
using namespace cohort::test;
namespace fs = std::filesystem;

namespace {
using test::TempDir;
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

// --- Checksums (cohort.crc32c.*) and escaped error text ------------------------------------------

namespace {
/// A small cohort file: two tensors and one metadata entry.
std::vector<char> cohort_file(const fs::path& dir) {
  const std::vector<float> a{1.f, 2.f, 3.f}, b{-1.f, 0.5f};
  SafetensorsWriter w;
  w.add<float>("a", {3}, a);
  w.add<float>("b", {2, 1}, b);
  w.set_metadata("format", "pt");
  w.write(dir / "c.safetensors");
  return file_bytes(dir / "c.safetensors");
}

std::string checksum_error(std::vector<char> bytes) {
  try {
    SafetensorsFile::parse("c.safetensors", std::move(bytes));
  } catch (const ChecksumError& e) {
    return e.what();
  }
  FAIL("no ChecksumError");
  return {};
}

} // namespace

TEST_CASE("safetensors: every tensor and the header carry a CRC32C, Python's files carry none") {
  TempDir dir;
  cohort_file(dir.path);
  const auto f = SafetensorsFile::read(dir.path / "c.safetensors");
  CHECK(f.checksummed());
  for (const auto& e : f.entries()) {
    const auto data = f.bytes(e);
    CHECK(f.metadata().at("cohort.crc32c." + e.name) == detail::crc_hex(crc32c(data.data(), data.size())));
  }
  CHECK(f.metadata().at("cohort.crc32c").size() == 8);
  CHECK(f.metadata().at("format") == "pt");
  CHECK_FALSE(cohort::test::fixture("layer_linear").checksummed()); // written by Python, loads unchecked

  SafetensorsWriter w;
  CHECK_THROWS_AS(w.set_metadata("cohort.crc32c.a", "00000000"), ValueError);
  CHECK_THROWS_AS(w.set_metadata("cohort.crc32c", "00000000"), ValueError);
  CHECK_NOTHROW(w.set_metadata("cohort.crc32cx", "not a checksum key"));
  const std::vector<float> x{1.f};
  CHECK_THROWS_AS(w.add<float>("__metadata__", {1}, x), ValueError);
}

TEST_CASE("safetensors: a flipped payload bit is a ChecksumError naming the file, tensor and both CRCs") {
  TempDir dir;
  auto bytes = cohort_file(dir.path);
  const auto f = SafetensorsFile::parse("c.safetensors", bytes);
  const auto& b = f.at("b");
  const std::size_t at = 8 + header_of(bytes).size() + b.begin + 5; // a byte of tensor "b"
  bytes[at] = char(bytes[at] ^ 0x10);
  auto corrupt_b = f.values<float>("b");
  reinterpret_cast<char*>(corrupt_b.data())[5] ^= 0x10;
  const std::string m = checksum_error(bytes);
  CHECK(m == "c.safetensors: tensor \"b\": checksum mismatch: expected CRC32C " + f.metadata().at("cohort.crc32c.b") +
                 ", found " + detail::crc_hex(crc32c(corrupt_b.data(), 8)) +
                 " over its 8 bytes (at data offsets 12..20): the tensor's data is corrupt");
  CHECK_THROWS_AS(SafetensorsFile::parse("c.safetensors", bytes), FormatError); // a ChecksumError is a FormatError
}

TEST_CASE("safetensors: every single-bit flip of a cohort file is rejected or leaves its meaning unchanged") {
  TempDir dir;
  const auto good = cohort_file(dir.path);
  const auto ref = SafetensorsFile::parse("c.safetensors", good);
  std::size_t rejected = 0, harmless = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = good;
      bad[i] = char(bad[i] ^ (1 << bit));
      try {
        const auto f = SafetensorsFile::parse("c.safetensors", std::move(bad));
        // Accepted: only JSON whitespace may have changed (the header's padding).
        ++harmless;
        REQUIRE(f.metadata() == ref.metadata());
        REQUIRE(f.entries().size() == ref.entries().size());
        for (const auto& e : ref.entries()) {
          const auto a = f.bytes(f.at(e.name)), b = ref.bytes(e);
          REQUIRE(f.at(e.name).dtype == e.dtype);
          REQUIRE(f.at(e.name).shape == e.shape);
          REQUIRE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
        }
      } catch (const FormatError&) {
        ++rejected;
      }
    }
  INFO(rejected << " rejected, " << harmless << " harmless");
  CHECK(rejected + harmless == good.size() * 8);
  CHECK(harmless < 8 * 8); // a few padding spaces may turn into other whitespace
}

TEST_CASE("safetensors: missing, orphaned, malformed or mismatching checksums are ChecksumErrors") {
  TempDir dir;
  const auto good = cohort_file(dir.path);
  const std::string h = header_of(good);
  // A tensor without its checksum in a checksummed file.
  CHECK(checksum_error(edit_header(good, entry_text(h, "cohort.crc32c.b"), "")) ==
        "c.safetensors: tensor \"b\" has no checksum (\"cohort.crc32c.b\") though the file carries checksums");
  // A checksum for a tensor the file does not hold.
  CHECK(checksum_error(edit_header(good, "\"format\"", "\"cohort.crc32c.zz\":\"00000000\",\"format\"")) ==
        "c.safetensors: metadata \"cohort.crc32c.zz\" is the checksum of a tensor the file does not hold");
  // Tensor checksums without the header checksum.
  CHECK(checksum_error(edit_header(good, entry_text(h, "cohort.crc32c"), ""))
            .find("has tensor checksums (cohort.crc32c.*) but no header checksum (cohort.crc32c)") !=
        std::string::npos);
  // Not 8 lowercase hex digits.
  const std::string b_entry = entry_text(h, "cohort.crc32c.b");
  CHECK(checksum_error(edit_header(good, b_entry, "\"cohort.crc32c.b\":\"12345g78\",")) ==
        "c.safetensors: metadata \"cohort.crc32c.b\" is \"12345g78\", expected a CRC32C as 8 lowercase hex digits");
  for (const char* bad : {"-1234567", "ABCDEF01", "1234567", "123456789"})
    CHECK(checksum_error(edit_header(good, b_entry, std::string("\"cohort.crc32c.b\":\"") + bad + "\","))
              .find("8 lowercase hex digits") != std::string::npos);
  // The header checksum covers metadata values, dtypes and shapes (a same-size dtype change
  // passes every structural check).
  const std::string expected_header = SafetensorsFile::parse("c", good).metadata().at("cohort.crc32c");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"pt\"", "\"pu\""},
                                 {"\"dtype\":\"F32\",\"shape\":[2,1]", "\"dtype\":\"I32\",\"shape\":[2,1]"},
                                 {"\"shape\":[2,1]", "\"shape\":[1,2]"}}) {
    const std::string m = checksum_error(edit_header(good, from, to));
    INFO(m);
    CHECK(m.find("c.safetensors: header checksum mismatch: expected CRC32C " + expected_header +
                 " (cohort.crc32c), found ") == 0);
  }
}

TEST_CASE("safetensors: repeated tensor names or metadata keys are rejected") {
  check_rejected(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, "tensor \"a\" appears twice");
  check_rejected(R"({"__metadata__":{"k":"1","k":"2"}})", 0, "__metadata__ key \"k\" appears twice");
  check_rejected(R"({"__metadata__":{},"__metadata__":{}})", 0, "__metadata__ appears twice");
}

TEST_CASE("safetensors: text from the file is escaped in error messages (no raw bytes reach a terminal)") {
  const auto rejected_message = [](const std::string& header, std::size_t data_bytes) {
    try {
      SafetensorsFile::parse("bad.safetensors", with_header(header, data_bytes));
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    FAIL("accepted");
    return std::string();
  };
  // A tensor name with a raw 0xff byte and an escaped 0x01 (the parser decodes \u0001).
  std::string m =
      rejected_message("{\"x\xff\\u0001\\\"\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
  CHECK(m.find("tensor \"x\\xff\\x01\\\"\" spans 8 bytes") != std::string::npos);
  CHECK(printable_ascii(m));
  // A dtype with the same bytes.
  m = rejected_message("{\"a\":{\"dtype\":\"\xff\\u0001\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  CHECK(m.find("has unknown dtype \"\\xff\\x01\"") != std::string::npos);
  CHECK(printable_ascii(m));
  // A metadata key; and a raw control byte, which JSON forbids in a string: the parse error
  // quotes the bytes around it.
  m = rejected_message("{\"__metadata__\":{\"k\xff\":7}}", 0);
  CHECK(m.find("__metadata__ value of \"k\\xff\" is not a string") != std::string::npos);
  CHECK(printable_ascii(m));
  m = rejected_message("{\"a\x01\xfe\":{}}", 0);
  CHECK(m.find("control character in string at byte 3 of the header, near \"{\\\"a\\x01\\xfe\\\":{}}\"") !=
        std::string::npos);
  CHECK(printable_ascii(m));
  // Long text is cut.
  m = rejected_message("{\"" + std::string(5000, 'n') + "\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                       8);
  CHECK(m.find("... (5000 bytes in all)") != std::string::npos);
  CHECK(m.size() < 600);
  CHECK(detail::escaped("a\"\\\x7f\x1b[31m") == "a\\\"\\\\\\x7f\\x1b[31m");
}

TEST_CASE("safetensors: the committed fuzz seeds are valid files, with and without checksums") {
  // tests/fuzz/corpus/safetensors (make_corpus.cpp): if the format changes, regenerate them, or
  // the fuzzer starts from files it rejects at once and never reaches the loaders.
  const fs::path seeds = fs::path(COHORT_FIXTURE_DIR).parent_path().parent_path() / "fuzz" / "corpus" / "safetensors";
  for (const char* name : {"checkpoint", "weights"}) {
    CAPTURE(name);
    CHECK(SafetensorsFile::read(seeds / name).checksummed());
    CHECK_FALSE(SafetensorsFile::read(seeds / (std::string(name) + "_unchecked")).checksummed());
  }
}
