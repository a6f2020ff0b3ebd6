// expect: CIFAR images are 3x32x32: the network input must be Input<3, 32, 32>
#include <cohort/data/cifar.hpp>
using namespace cohort;
// A CIFAR directory loaded for a Fashion-MNIST network: refused at compile time.
ImageDataset<Shape<1, 28, 28>> load() {
  return load_cifar<Shape<1, 28, 28>>("cifar-10-batches-bin", CifarVariant::cifar10, Split::train, Normalization{});
}
