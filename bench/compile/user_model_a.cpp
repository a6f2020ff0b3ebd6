// The issue-32 "user translation unit": one Trainer<models::ModelA, Adadelta<>> and its fit, as a
// user's program would hold it. bench/compile_time.sh compiles it in both kernel modes.
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

int main(int argc, char** argv) {
  using namespace cohort;
  using Data = ImageDataset<Shape<1, 28, 28>>;
  const std::string dir = argc > 1 ? argv[1] : default_data_dir;
  const auto norm = Normalization{0.2860f, 0.3530f};
  Data train = Data::load(find_idx_files(dir, Split::train), 10, norm);
  Data test = Data::load(find_idx_files(dir, Split::test), 10, norm);
  Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128});
  trainer.fit(train, /*epochs=*/1, &test);
}
