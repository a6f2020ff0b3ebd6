// libFuzzer target: decode_image (libpng, libjpeg-turbo and cohort's wrapper around them: the
// setjmp stages, the conversions, the header and pixel limits) on raw bytes, to gray and to RGB,
// then the transforms a folder applies. Every rejection must be a cohort::Error (never a crash,
// a leak or a read outside the input), and what is accepted must have the size its header says.
#include <cstddef>
#include <cstdint>
#include <span>

#include <cohort/data/image_decode.hpp>
#include <cohort/data/image_transforms.hpp>

using namespace cohort;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  const DecodeLimits limits{.max_pixels = 1 << 20}; // keeps each input's memory small
  for (const std::size_t channels : {std::size_t{1}, std::size_t{3}}) {
    try {
      // No extension: the content decides the decoder (a ".png" name would refuse JPEG bytes).
      const Image8 img = decode_image(bytes, channels, "fuzz-input", limits);
      const ImageInfo info = read_image_info(bytes, "fuzz-input", limits);
      if (img.channels != channels || img.width != info.width || img.height != info.height ||
          img.pixels.size() != img.width * img.height * channels)
        __builtin_trap();
      const Image8 small = resize_shorter_side(img, 7);
      const Image8 cut = center_crop(small, 5, 6);
      if (cut.pixels.size() != 5 * 6 * channels) __builtin_trap();
    } catch (const Error&) {
    }
  }
  return 0;
}
