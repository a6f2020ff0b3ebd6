// A network whose per-pixel output is 4x4 trained on 8x8 masks: a compile error naming the
// dataset's mask shape and the network's output plane, not a run that reads masks out of step.
// expect: the dataset's masks are not the network's output height and width
// expect: mask_shape_matches_network_output<cohort::Shape<8, 8>, cohort::Shape<4, 4> >
#include <cohort/cohort.hpp>
#include <cohort/data/dense_dataset.hpp>
using namespace cohort;
using Net = Sequential<Input<1, 8, 8>, Conv2d<1, 3, 3, 1, 1>, MaxPool2d<2>>;
void train(const MaskDataset<Shape<1, 8, 8>>& d) {
  Trainer<Net, Sgd<>> t(Sgd({.lr = 0.1}));
  t.fit(d, 1);
}
