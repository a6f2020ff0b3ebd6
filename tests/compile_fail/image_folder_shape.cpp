// A folder of 3x32x32 samples fed to a 1x28x28 network: the data seam's compile error names both.
// expect: dataset_shape_matches_network_input<cohort::Shape<3, 32, 32>, cohort::Shape<1, 28, 28> >
#include <cohort/cohort.hpp>
#include <cohort/data/image_folder.hpp>
#include <cohort/models/seed_models.hpp>
using namespace cohort;
void train(const ImageFolder<Shape<3, 32, 32>>& folder) {
  Trainer<models::ModelA, Adadelta<>> t(Adadelta({.lr = 0.5}));
  t.fit(folder, 1);
}
