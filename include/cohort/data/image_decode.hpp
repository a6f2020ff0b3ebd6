#pragma once
/// \file
/// PNG and JPEG files decoded by the maintained libraries (libpng, libjpeg-turbo) into 8-bit
/// grayscale or RGB, converted as PIL's `Image.open(f).convert("L" | "RGB")` converts them, so a
/// folder reaches the network as torchvision's ImageFolder gives it. This header (and
/// data/image_folder.hpp) is cohort's optional image component: it needs <png.h> and
/// <jpeglib.h> and links PNG::PNG and JPEG::JPEG (CMake target cohort::image); the rest of
/// cohort stays header-only without them.
/// Example (compiled: tests/docs/headers.cpp, "data/image_decode"):
///
///     cohort::Image8 rgb = cohort::read_image("cat.jpg", 3);    // 3 channels: convert("RGB")
///     std::vector<std::uint8_t> bytes = cohort::read_file("dog.png");
///     cohort::ImageInfo info = cohort::read_image_info(bytes, "dog.png");   // the header only
///
/// Conversions, as PIL does them: palette images expand through their palette; alpha is
/// dropped, not composited; gray becomes RGB by repetition, RGB becomes gray as L = (19595 R +
/// 38470 G + 7471 B + 2^15) >> 16; gray below 8 bits scales to 0..255; 16-bit colour keeps the
/// high byte; 16-bit gray is clipped to 255 (PIL's "I;16" to "L": most such images come out
/// white, as they do in torchvision); gAMA and ICC profiles are ignored; EXIF orientation is
/// not applied. CMYK JPEGs are refused (FormatError), not guessed.
///
/// Every failure is a FormatError (IoError when the file cannot be read) naming the file and
/// what is wrong: not PNG or JPEG, the content of one under the other's extension, truncated or
/// corrupt data (libjpeg's "corrupt data" warnings are errors: no gray-filled image is ever
/// returned), zero bytes, or more pixels than `DecodeLimits::max_pixels` (checked from the
/// header, before anything is allocated).

#include <cctype>
#include <cerrno>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <png.h>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// jpeglib.h needs FILE and size_t first.
#include <jpeglib.h>

#include "cohort/core/error.hpp"
#include "cohort/data/image_transforms.hpp"

namespace cohort {

enum class ImageFormat { png, jpeg };

inline const char* format_name(ImageFormat f) noexcept { return f == ImageFormat::png ? "PNG" : "JPEG"; }

/// What a file's header says.
struct ImageInfo {
  ImageFormat format = ImageFormat::png;
  std::size_t width = 0, height = 0;
};

/// Bounds checked from the header before any pixel memory is allocated.
struct DecodeLimits {
  /// PIL's DecompressionBombError threshold (twice Image.MAX_IMAGE_PIXELS).
  std::uint64_t max_pixels = 178956970;
};

/// The format `bytes` start with (PNG's 8-byte signature, JPEG's SOI marker), if any.
inline std::optional<ImageFormat> sniff_image_format(std::span<const std::uint8_t> bytes) noexcept {
  static constexpr std::uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), png_sig, 8) == 0) return ImageFormat::png;
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::jpeg;
  return std::nullopt;
}

namespace detail {

/// The decoders' state across their setjmp scopes. libpng and libjpeg report errors by longjmp;
/// every function that can be jumped out of holds only trivially destructible locals, and every
/// allocation is made outside them, so no C++ object is ever skipped by a jump.
struct CodecJump {
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200] = {};
  bool corrupt_warning = false;
};

// ---- PNG ---------------------------------------------------------------------------------

struct PngInput {
  CodecJump jump;
  const std::uint8_t* data = nullptr;
  std::size_t size = 0, pos = 0;
};

extern "C" inline void cohort_png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->size - in->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, in->data + in->pos, n);
  in->pos += n;
}
extern "C" inline void cohort_png_error(png_structp png, png_const_charp msg) {
  auto* in = static_cast<PngInput*>(png_get_error_ptr(png));
  std::snprintf(in->jump.message, sizeof in->jump.message, "%s", msg);
  std::longjmp(in->jump.jump, 1);
}
extern "C" inline void cohort_png_warning(png_structp, png_const_charp) {} // PIL ignores them too

/// After the header: what the rows will hold.
struct PngLayout {
  std::uint32_t width = 0, height = 0;
  int channels = 0, bit_depth = 0, color_type = 0;
  std::size_t row_bytes = 0;
};

/// Stage 1: signature, IHDR and the transformations. Returns false after a libpng error.
inline bool png_read_header(png_structp png, png_infop info, PngInput* in, PngLayout* out, bool transform) {
  if (setjmp(in->jump.jump)) return false;
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff); // our own limit (max_pixels) is checked after
  png_read_info(png, info);
  out->width = png_get_image_width(png, info);
  out->height = png_get_image_height(png, info);
  out->color_type = png_get_color_type(png, info);
  out->bit_depth = png_get_bit_depth(png, info);
  if (!transform) return true;
  if (out->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (out->color_type == PNG_COLOR_TYPE_GRAY && out->bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  // 16-bit colour: PIL unpacks the high byte ("RGB;16B"); 16-bit gray stays 16 bits ("I;16")
  // and is clipped when converted (see the file comment).
  if (out->bit_depth == 16 && out->color_type != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->channels = png_get_channels(png, info);
  out->bit_depth = png_get_bit_depth(png, info);
  out->row_bytes = png_get_rowbytes(png, info);
  return true;
}

/// Stage 2: every row (rows point into memory allocated by the caller), then the chunks to IEND.
inline bool png_read_rows(png_structp png, png_infop info, PngInput* in, png_bytepp rows) {
  if (setjmp(in->jump.jump)) return false;
  png_read_image(png, rows);
  png_read_end(png, info);
  return true;
}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

/// libpng reading `bytes` through cohort_png_read, its errors caught into `in.jump` (each stage
/// above sets its own setjmp). Not movable: libpng holds the address of `in`.
struct PngReader {
  PngInput in;
  PngHandles h;

  PngReader(std::span<const std::uint8_t> bytes, const std::string& name) {
    in.data = bytes.data();
    in.size = bytes.size();
    h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &in, cohort_png_error, cohort_png_warning);
    if (h.png) h.info = png_create_info_struct(h.png);
    if (!h.png || !h.info) throw FormatError(concat(name, ": libpng could not allocate its state"));
    png_set_read_fn(h.png, &in, cohort_png_read);
  }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;
};

[[noreturn]] inline void fail_decode(const std::string& name, const char* what, const char* detail_msg) {
  throw FormatError(concat(name, ": ", what, detail_msg && *detail_msg ? " (" : "", detail_msg ? detail_msg : "",
                           detail_msg && *detail_msg ? ")" : ""));
}

inline void check_dimensions(const std::string& name, ImageFormat f, std::uint64_t w, std::uint64_t h,
                             const DecodeLimits& limits) {
  if (w == 0 || h == 0)
    throw FormatError(concat(name, ": the ", format_name(f), " header says ", w, "x", h, " pixels"));
  if (w * h > limits.max_pixels)
    throw FormatError(concat(name, ": ", w, "x", h, " pixels (", w * h, ") is more than the limit of ",
                             limits.max_pixels, " (DecodeLimits::max_pixels; PIL's decompression-bomb bound)"));
}

/// Reads a PNG's header (transform false) or the whole image into `out` (channels 1 or 3).
inline ImageInfo decode_png(std::span<const std::uint8_t> bytes, const std::string& name, const DecodeLimits& limits,
                            Image8* out, std::size_t channels) {
  // IHDR's dimensions first (bytes 16-23, after the signature and IHDR's length and type):
  // the limit holds even for a file that ends right after its header.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](std::size_t at) {
      return std::uint64_t(bytes[at]) << 24 | std::uint64_t(bytes[at + 1]) << 16 | std::uint64_t(bytes[at + 2]) << 8 |
             std::uint64_t(bytes[at + 3]);
    };
    check_dimensions(name, ImageFormat::png, be32(16), be32(20), limits);
  }
  PngReader r(bytes, name);
  PngInput& in = r.in;
  PngHandles& h = r.h;
  PngLayout lay;
  if (!png_read_header(h.png, h.info, &in, &lay, out != nullptr))
    fail_decode(name, "not a readable PNG", in.jump.message);
  check_dimensions(name, ImageFormat::png, lay.width, lay.height, limits);
  const ImageInfo info{ImageFormat::png, lay.width, lay.height};
  if (!out) return info;
  std::vector<std::uint8_t> raw(lay.row_bytes * lay.height);
  std::vector<png_bytep> rows(lay.height);
  for (std::size_t y = 0; y < lay.height; ++y) rows[y] = raw.data() + y * lay.row_bytes;
  if (!png_read_rows(h.png, h.info, &in, rows.data())) fail_decode(name, "corrupt or truncated PNG", in.jump.message);
  // raw: lay.channels samples per pixel (gray, gray+alpha, RGB, RGBA), 8 bits, or 16-bit gray.
  *out = Image8(lay.width, lay.height, channels);
  const std::size_t n = std::size_t(lay.width) * lay.height;
  const int src_c = lay.channels;
  const bool gray16 = lay.bit_depth == 16;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t r, g, b;
    if (gray16) {
      const std::uint16_t v = std::uint16_t(raw[2 * i] << 8 | raw[2 * i + 1]); // PNG is big-endian
      r = g = b = std::uint8_t(v > 255 ? 255 : v);
    } else if (src_c <= 2) {
      r = g = b = raw[i * std::size_t(src_c)];
    } else {
      const std::uint8_t* p = raw.data() + i * std::size_t(src_c);
      r = p[0], g = p[1], b = p[2];
    }
    if (channels == 3) {
      out->pixels[3 * i] = r, out->pixels[3 * i + 1] = g, out->pixels[3 * i + 2] = b;
    } else if (src_c <= 2 || gray16) {
      out->pixels[i] = r;
    } else {
      out->pixels[i] = std::uint8_t((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16);
    }
  }
  return info;
}

// ---- JPEG --------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr; // first: libjpeg's err pointer is this struct
  CodecJump* jump = nullptr;
};

extern "C" inline void cohort_jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->jump->message);
  std::longjmp(e->jump->jump, 1);
}
extern "C" inline void cohort_jpeg_message(j_common_ptr cinfo, int level) {
  if (level != -1) return; // trace messages; -1 is "corrupt data" (libjpeg would fill with gray)
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  if (!e->jump->corrupt_warning) (*cinfo->err->format_message)(cinfo, e->jump->message);
  e->jump->corrupt_warning = true;
}

inline bool jpeg_header_stage(jpeg_decompress_struct* cinfo, CodecJump* jump, const std::uint8_t* data,
                              std::size_t size) {
  if (setjmp(jump->jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

/// Decodes every scanline into `rows` (allocated by the caller, output_components bytes a pixel).
inline bool jpeg_pixels_stage(jpeg_decompress_struct* cinfo, CodecJump* jump, std::uint8_t* pixels,
                              std::size_t stride) {
  if (setjmp(jump->jump)) return false;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = pixels + std::size_t(cinfo->output_scanline) * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

inline ImageInfo decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name, const DecodeLimits& limits,
                             Image8* out, std::size_t channels) {
  CodecJump jump;
  JpegError err;
  err.jump = &jump;
  JpegHandle h;
  h.cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = cohort_jpeg_error_exit;
  err.mgr.emit_message = cohort_jpeg_message;
  jpeg_create_decompress(&h.cinfo);
  h.created = true;
  if (!jpeg_header_stage(&h.cinfo, &jump, bytes.data(), bytes.size()))
    fail_decode(name, "not a readable JPEG", jump.message);
  check_dimensions(name, ImageFormat::jpeg, h.cinfo.image_width, h.cinfo.image_height, limits);
  const ImageInfo info{ImageFormat::jpeg, h.cinfo.image_width, h.cinfo.image_height};
  if (!out) return info;
  const J_COLOR_SPACE cs = h.cinfo.jpeg_color_space;
  if (cs == JCS_CMYK || cs == JCS_YCCK)
    throw FormatError(concat(name, ": a CMYK JPEG; cohort decodes grayscale and colour (YCbCr/RGB) JPEGs only"));
  const bool gray = cs == JCS_GRAYSCALE;
  // Colour is decoded to RGB and converted to gray by PIL's formula (not libjpeg's Y channel),
  // because that is what PIL's convert("L") computes from the RGB it decoded.
  h.cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  const std::size_t comps = gray ? 1 : 3;
  std::vector<std::uint8_t> raw(std::size_t(info.width) * info.height * comps);
  if (!jpeg_pixels_stage(&h.cinfo, &jump, raw.data(), std::size_t(info.width) * comps))
    fail_decode(name, "corrupt or truncated JPEG", jump.message);
  if (jump.corrupt_warning) fail_decode(name, "corrupt or truncated JPEG", jump.message);
  *out = Image8(info.width, info.height, channels);
  const std::size_t n = std::size_t(info.width) * info.height;
  if (comps == channels) {
    out->pixels = std::move(raw);
  } else if (channels == 3) {
    for (std::size_t i = 0; i < n; ++i) out->pixels[3 * i] = out->pixels[3 * i + 1] = out->pixels[3 * i + 2] = raw[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* p = raw.data() + 3 * i;
      out->pixels[i] = std::uint8_t((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16);
    }
  }
  return info;
}

/// A path's extension in lower case, as std::filesystem::path::extension() finds it (".png",
/// ".jpeg"; empty for "name", ".hidden" or ".."), without building a path (once per decode).
inline std::string lower_extension(std::string_view path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::size_t dot = file.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || file == "..") return {};
  std::string ext(file.substr(dot));
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

inline ImageFormat checked_format(std::span<const std::uint8_t> bytes, const std::string& name) {
  if (bytes.empty()) throw FormatError(concat(name, ": the file is empty (0 bytes)"));
  const auto f = sniff_image_format(bytes);
  if (!f) throw FormatError(concat(name, ": not a PNG or JPEG file (its first bytes are neither signature)"));
  // The extension says what the user meant; a mismatch is a mislabelled or damaged file.
  const std::string ext = lower_extension(name);
  const bool says_png = ext == ".png", says_jpeg = ext == ".jpg" || ext == ".jpeg";
  if ((says_png && *f != ImageFormat::png) || (says_jpeg && *f != ImageFormat::jpeg))
    throw FormatError(
        concat(name, ": the extension says ", says_png ? "PNG" : "JPEG", ", the content is ", format_name(*f)));
  return *f;
}

} // namespace detail

/// The header of an image in memory (`name` is used in messages and for its extension).
inline ImageInfo read_image_info(std::span<const std::uint8_t> bytes, const std::string& name,
                                 const DecodeLimits& limits = {}) {
  const ImageFormat f = detail::checked_format(bytes, name);
  return f == ImageFormat::png ? detail::decode_png(bytes, name, limits, nullptr, 1)
                               : detail::decode_jpeg(bytes, name, limits, nullptr, 1);
}

/// Decodes an image in memory to `channels` (1: PIL's "L", 3: "RGB") 8-bit channels.
inline Image8 decode_image(std::span<const std::uint8_t> bytes, std::size_t channels, const std::string& name,
                           const DecodeLimits& limits = {}) {
  if (channels != 1 && channels != 3)
    throw ValueError(detail::concat("decode_image: ", name, ": 1 (gray) or 3 (RGB) channels, not ", channels));
  const ImageFormat f = detail::checked_format(bytes, name);
  Image8 img;
  if (f == ImageFormat::png)
    detail::decode_png(bytes, name, limits, &img, channels);
  else
    detail::decode_jpeg(bytes, name, limits, &img, channels);
  return img;
}

/// A whole file's bytes into `bytes` (resized to the file's size; its capacity is reused, so a
/// thread reading many files allocates only for the largest). IoError naming the file when it
/// cannot be opened or read; files larger than `max_bytes` are refused before anything is
/// allocated. POSIX open/fstat/read/close: four system calls, a third of stdio's cost on small
/// files (ImageFolder reads one per sample).
inline void read_file_into(const std::filesystem::path& path, std::vector<std::uint8_t>& bytes,
                           std::uint64_t max_bytes = std::uint64_t{1} << 31) {
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw IoError(detail::concat(path.string(), ": cannot open for reading (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    throw IoError(detail::concat(path.string(), ": cannot read its size (", std::strerror(errno), ")"));
  if (!S_ISREG(st.st_mode)) throw IoError(detail::concat(path.string(), ": not a regular file"));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    throw FormatError(detail::concat(path.string(), ": ", size, " bytes, more than the limit of ", max_bytes));
  bytes.resize(static_cast<std::size_t>(size));
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t got = ::read(f.fd, bytes.data() + at, bytes.size() - at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw IoError(detail::concat(path.string(), ": read failed after ", at, " of ", size, " bytes (",
                                   got < 0 ? std::strerror(errno) : "the file became shorter", ")"));
    at += static_cast<std::size_t>(got);
  }
}

/// A whole file's bytes (read_file_into into a new vector).
inline std::vector<std::uint8_t> read_file(const std::filesystem::path& path,
                                           std::uint64_t max_bytes = std::uint64_t{1} << 31) {
  std::vector<std::uint8_t> bytes;
  read_file_into(path, bytes, max_bytes);
  return bytes;
}

/// read_file + decode_image.
inline Image8 read_image(const std::filesystem::path& path, std::size_t channels, const DecodeLimits& limits = {}) {
  return decode_image(read_file(path), channels, path.string(), limits);
}

} // namespace cohort
