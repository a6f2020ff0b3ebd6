// A dataset whose type names another sample shape than the network's input: a compile error
// naming both shapes (issue 34), not a silent 10% run.
// expect: the dataset's sample shape is not the network's input shape
// expect: dataset_shape_matches_network_input<cohort::Shape<1, 32, 32>, cohort::Shape<1, 28, 28> >
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
using namespace cohort;
void train(const ImageDataset<Shape<1, 32, 32>>& d) {
  Trainer<models::ModelA, Adadelta<>> t(Adadelta({.lr = 0.5}));
  t.fit(d, 1);
}
