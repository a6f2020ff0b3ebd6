// PNG and JPEG decoding (libpng, libjpeg-turbo) against PIL's Image.open(f).convert("L" | "RGB")
// on files of every colour type (tests/reference/make_image_fixtures.py), and every kind of bad
// file as a FormatError naming it.

#include <doctest/doctest.h>

#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cohort/data/image_decode.hpp>

#include "support/fixture_dir.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

fs::path decode_dir() { return fs::path(COHORT_FIXTURE_DIR) / "images" / "decode"; }

std::vector<std::uint8_t> bytes_of(const fs::path& p) { return read_file(p); }

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::size_t max_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  std::size_t m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max<std::size_t>(m, a[i] > b[i] ? a[i] - b[i] : b[i] - a[i]);
  return m;
}

/// A PNG whose IHDR says width x height (correct CRC), then nothing.
std::vector<std::uint8_t> png_header_only(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> b{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  auto be32 = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
  };
  be32(width);
  be32(height);
  for (std::uint8_t v : {8, 2, 0, 0, 0}) b.push_back(v); // 8-bit RGB, no interlace
  be32(std::uint32_t(crc32(0, b.data() + 12, 17)));
  return b;
}

} // namespace

TEST_CASE("image decode: every PNG and JPEG kind gives the bytes of PIL's convert to L and to RGB") {
  // JPEG: the same libjpeg-turbo algorithms as Pillow's (islow DCT, fancy upsampling); Debian's
  // 2.1.5 against Pillow's bundled 3.x measured identical on these files. PNG is lossless.
  for (const char* name : {"gray.png", "bilevel.png", "gray16.png", "gray_alpha.png", "rgb.png", "rgba.png",
                           "palette.png", "palette_trns.png", "palette_2bit.png", "rgb16.png", "rgba16.png",
                           "rgb420.jpg", "rgb444.jpg", "rgb422.jpg", "progressive.jpeg", "gray.jpg"}) {
    CAPTURE(name);
    const auto file = decode_dir() / name;
    for (const std::size_t c : {std::size_t{1}, std::size_t{3}}) {
      CAPTURE(c);
      const Image8 img = read_image(file, c);
      const auto expected = bytes_of(fs::path(file.string() + (c == 1 ? ".L" : ".RGB")));
      REQUIRE(img.channels == c);
      REQUIRE(img.pixels.size() == expected.size());
      CHECK(max_difference(img.pixels, expected) == 0);
      const ImageInfo info = read_image_info(bytes_of(file), file.string());
      CHECK(info.width == img.width);
      CHECK(info.height == img.height);
    }
  }
}

TEST_CASE("image decode: 16-bit gray is clipped at 255 as PIL's I16 to L conversion does") {
  const Image8 img = read_image(decode_dir() / "gray16.png", 1);
  // The fixture's first row starts 0, 255, 256, 65535.
  CHECK(img.pixels[0] == 0);
  CHECK(img.pixels[1] == 255);
  CHECK(img.pixels[2] == 255);
  CHECK(img.pixels[3] == 255);
}

TEST_CASE("image decode: bad files are FormatErrors naming the file and what is wrong") {
  test::TempDir dir;
  const auto png = bytes_of(decode_dir() / "rgb.png");
  const auto jpg = bytes_of(decode_dir() / "rgb420.jpg");
  auto check = [&](const std::string& name, const std::vector<std::uint8_t>& b, const std::string& what) {
    CAPTURE(name);
    const fs::path p = dir.path / name;
    write_bytes(p, b);
    CHECK_THROWS_WITH_AS(read_image(p, 3), doctest::Contains((p.string() + ": " + what).c_str()), FormatError);
  };
  check("empty.png", {}, "the file is empty (0 bytes)");
  check("text.png", {'h', 'e', 'l', 'l', 'o', '\n'}, "not a PNG or JPEG file");
  check("png_named.jpg", png, "the extension says JPEG, the content is PNG");
  check("jpeg_named.png", jpg, "the extension says PNG, the content is JPEG");
  check("truncated.png", std::vector<std::uint8_t>(png.begin(), png.begin() + std::ptrdiff_t(png.size() / 2)),
        "corrupt or truncated PNG");
  check("header_only.png", std::vector<std::uint8_t>(png.begin(), png.begin() + 20), "not a readable PNG");
  check("truncated.jpg", std::vector<std::uint8_t>(jpg.begin(), jpg.end() - 40), // inside the scan data
        "corrupt or truncated JPEG");
  check("sof_missing.jpg", std::vector<std::uint8_t>(jpg.begin(), jpg.begin() + 40), "not a readable JPEG");
  auto flipped = png; // a bit flipped inside the image data: IDAT's CRC no longer matches
  flipped[flipped.size() - 20] ^= 0x10;
  check("flipped.png", flipped, "corrupt or truncated PNG");
  check("huge.png", png_header_only(100000, 100000),
        "100000x100000 pixels (10000000000) is more than the limit of 178956970");
  check("zero.png", png_header_only(0, 5), "the PNG header says 0x5 pixels");
  CHECK_THROWS_WITH_AS(read_image(decode_dir() / "cmyk.jpg", 3), doctest::Contains("cmyk.jpg: a CMYK JPEG"),
                       FormatError);
  // Unreadable: a missing file is an IoError naming it.
  CHECK_THROWS_WITH_AS(read_image(dir.path / "missing.png", 3),
                       doctest::Contains(((dir.path / "missing.png").string() + ": cannot open").c_str()), IoError);
}

TEST_CASE("image decode: the pixel limit is the caller's to set, checked before decoding") {
  const auto png = bytes_of(decode_dir() / "rgb.png"); // 14 x 10
  CHECK_NOTHROW(decode_image(png, 3, "rgb.png", {.max_pixels = 140}));
  CHECK_THROWS_WITH_AS(decode_image(png, 3, "rgb.png", {.max_pixels = 139}),
                       doctest::Contains("rgb.png: 14x10 pixels (140) is more than the limit of 139"), FormatError);
}

TEST_CASE("image decode: read_file_into reads whole files into a reused buffer, and refuses what is not a file") {
  test::TempDir dir;
  write_bytes(dir.path / "big.bin", std::vector<std::uint8_t>(5000, 7));
  write_bytes(dir.path / "small.bin", {1, 2, 3});
  write_bytes(dir.path / "empty.bin", {});
  std::vector<std::uint8_t> buf;
  read_file_into(dir.path / "big.bin", buf);
  CHECK(buf == std::vector<std::uint8_t>(5000, 7));
  const std::uint8_t* storage = buf.data();
  read_file_into(dir.path / "small.bin", buf);
  CHECK(buf == std::vector<std::uint8_t>{1, 2, 3});
  CHECK(buf.data() == storage); // no new allocation for a smaller file
  read_file_into(dir.path / "empty.bin", buf);
  CHECK(buf.empty());
  CHECK_THROWS_WITH_AS(read_file_into(dir.path, buf),
                       doctest::Contains((dir.path.string() + ": not a regular file").c_str()), IoError);
  CHECK_THROWS_WITH_AS(read_file(dir.path / "big.bin", 4999),
                       doctest::Contains("big.bin: 5000 bytes, more than the limit of 4999"), FormatError);
}

TEST_CASE("image decode: lower_extension finds what std::filesystem::path::extension finds") {
  for (const char* name : {"a/b/cat.PNG", "dog.Jpeg", "x.tar.JPG", "noext", "dir.d/noext", ".hidden", "a/.hidden", "..",
                           "a/..", "trailing.", "a/b.c/d", "/abs/photo.jpg", ""}) {
    const std::string path = name;
    CAPTURE(path);
    std::string want = fs::path(name).extension().string();
    for (char& c : want) c = char(std::tolower(static_cast<unsigned char>(c)));
    CHECK(detail::lower_extension(name) == want);
  }
}
