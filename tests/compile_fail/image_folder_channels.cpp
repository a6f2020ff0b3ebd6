// An ImageFolder for a network input that is neither gray nor RGB images: refused at compile time.
// expect: ImageFolder: the network.s input must be Shape<1, H, W>
#include <cohort/data/image_folder.hpp>
auto open_four_channels() { return cohort::ImageFolder<cohort::Shape<4, 32, 32>>::open("data"); }
