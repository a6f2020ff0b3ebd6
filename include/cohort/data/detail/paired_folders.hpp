#pragma once
/// \file
/// The pairing rule shared by the two-folder datasets (data/mask_folder.hpp,
/// data/image_pair_folder.hpp): the image files of one folder, sorted by name, each with the
/// file of the same stem in the other folder. Part of the image component (needs
/// data/image_decode.hpp).

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/data/image_decode.hpp"

namespace cohort::detail {

inline bool is_image_file(const std::filesystem::path& p) {
  const std::string ext = lower_extension(p.string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

/// IoError unless both are folders; `reader` and `what` name the call and the second folder in
/// the message ("read_mask_folders", "masks").
inline void check_pair_folders(const std::filesystem::path& images_dir, const std::filesystem::path& partners_dir,
                               std::string_view reader, std::string_view what) {
  for (const auto* dir : {&images_dir, &partners_dir}) {
    std::error_code ec;
    if (!std::filesystem::is_directory(*dir, ec))
      throw IoError(
          concat(dir->string(), ": not a directory (", reader, " needs an images folder and a ", what, " folder)"));
  }
}

/// The .png/.jpg/.jpeg files of `dir`, in byte order of their names (Python's sorted()).
inline std::vector<std::filesystem::path> sorted_image_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> images;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && is_image_file(e.path())) images.push_back(e.path());
  std::sort(images.begin(), images.end());
  if (images.empty()) throw IoError(concat(dir.string(), ": no .png, .jpg or .jpeg images"));
  return images;
}

/// The file of `image`'s stem in `dir` with one of `extensions`: exactly one must exist (IoError
/// naming the image and the candidates otherwise, so that a.png beside a.jpg is never a silent pick).
inline std::filesystem::path partner_of(const std::filesystem::path& image, const std::filesystem::path& dir,
                                        std::initializer_list<std::string_view> extensions, std::string_view what) {
  std::vector<std::filesystem::path> found;
  std::string tried;
  for (const std::string_view ext : extensions) {
    std::filesystem::path candidate = dir / (image.stem().string() + std::string(ext));
    tried += (tried.empty() ? "" : " | ") + candidate.string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) found.push_back(std::move(candidate));
  }
  if (found.empty()) throw IoError(concat(image.string(), ": no ", what, " ", tried));
  if (found.size() > 1)
    throw IoError(concat(image.string(), ": two ", what, "s of its name, ", found[0].string(), " and ",
                         found[1].string(), " (keep one)"));
  return found[0];
}

} // namespace cohort::detail
