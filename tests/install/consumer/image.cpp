// Uses an installed cohort's image component (cohort::image): opens a folder given on the command
// line (links libpng and libjpeg through the installed target; the packaging test only builds it).
#include <cohort/data/image_folder.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 0;
  const auto folder = cohort::ImageFolder<cohort::Shape<3, 32, 32>>::open(argv[1]);
  std::printf("%zu images in %zu classes\n", folder.size(), folder.num_classes());
  return 0;
}
