#pragma once
/// \file
/// The pairing rule shared by the two-folder datasets (data/mask_folder.hpp,
/// data/image_pair_folder.hpp): the image files of one folder, sorted by name, each with the
/// file of the same stem in the other folder. Part of the image component (needs
/// data/image_decode.hpp).

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <iterator>
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

/// The partner files of one folder, listed once: for each stem, the regular files of that stem
/// whose extension is one of `extensions` in any case (a.PNG is a.png's partner, as an image
/// folder takes A.PNG as an image). Exactly one partner must exist for each image (IoError naming
/// the image and the candidates otherwise, so that a.png beside a.jpg is never a silent pick).
class PartnerIndex {
 public:
  PartnerIndex(const std::filesystem::path& dir, std::initializer_list<std::string_view> extensions,
               std::string_view what)
      : dir_(dir), what_(what) {
    for (const std::string_view ext : extensions) extensions_ += (extensions_.empty() ? "" : " | ") + std::string(ext);
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = lower_extension(e.path().native());
      if (std::find(extensions.begin(), extensions.end(), std::string_view(ext)) == extensions.end()) continue;
      files_.push_back({e.path().stem().native(), e.path()});
    }
    // By stem, then by name, so that the "two partners" message is the same on every file system.
    std::sort(files_.begin(), files_.end(),
              [](const Entry& a, const Entry& b) { return a.stem != b.stem ? a.stem < b.stem : a.path < b.path; });
  }

  const std::filesystem::path& operator()(const std::filesystem::path& image) const {
    const std::string stem = image.stem().native();
    const auto first = std::lower_bound(files_.begin(), files_.end(), stem,
                                        [](const Entry& e, const std::string& s) { return e.stem < s; });
    if (first == files_.end() || first->stem != stem)
      throw IoError(concat(image.string(), ": no ", what_, " ", (dir_ / stem).string(), " with extension ", extensions_,
                           " (in any case)"));
    const auto second = std::next(first);
    if (second != files_.end() && second->stem == stem)
      throw IoError(concat(image.string(), ": two ", what_, "s of its name, ", first->path.string(), " and ",
                           second->path.string(), " (keep one)"));
    return first->path;
  }

 private:
  struct Entry {
    std::string stem;
    std::filesystem::path path;
  };
  std::filesystem::path dir_;
  std::string what_;
  std::string extensions_;
  std::vector<Entry> files_;
};

} // namespace cohort::detail
