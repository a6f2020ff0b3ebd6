// A mask dataset of 32x32 images checked against a network built for 28x28: the error says the
// dataset's image shape is not the network's input and names both.
// expect: check_dense_data: the dataset's image shape is not the network's input shape
// expect: dense_input_matches_network<cohort::Shape<1, 32, 32>, cohort::Shape<1, 28, 28>
#include <cohort/data/dense_dataset.hpp>
#include <cohort/models/unet.hpp>
using namespace cohort;
void check(const MaskDataset<Shape<1, 32, 32>>& d) { check_dense_data<models::UNet<Shape<1, 28, 28>, 11>>(d); }
