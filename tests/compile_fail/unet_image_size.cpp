// A U-Net three levels deep on 28x28 images: 28 / 8 is not whole, so the decoder could not come
// back to the encoder's sizes; the error says so and what to do.
// expect: models::UNet: the image's height and width must be divisible by 2\^Depth
#include <cohort/cohort.hpp>
#include <cohort/models/unet.hpp>
using namespace cohort;
using Bad = models::UNet<Shape<1, 28, 28>, 11, 8, 3>;
Network<Bad> net;
