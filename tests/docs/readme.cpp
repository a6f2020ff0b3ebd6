// The README's C++ examples, compiled (and the first one run) as part of cohort_tests: each
// region between two "//! [name]" lines is quoted verbatim by a README block marked
// "<!-- snippet: name -->", and tests/docs/check_snippets.py (ctest docs.snippets) fails when the
// two differ. An API change that breaks an example breaks this file's build.
// clang-format off
//! [quick start: model]
#include <cohort/cohort.hpp>
using namespace cohort;

using ModelA = Sequential<Input<1, 28, 28>,
    Conv2d<1, 16, 3>, ReLU, Conv2d<16, 32, 3>, ReLU, MaxPool2d<2>, Dropout2d<0.10f>,
    Flatten, Linear<4608, 64>, ReLU, Dropout<0.25f>, Linear<64, 10>, LogSoftmax>;
static_assert(ModelA::parameter_count == 300'426);
//! [quick start: model]
// clang-format on

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/models/fast_resnet.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views
#if defined(COHORT_WITH_IMAGE)       // the image component (cohort::image)
#include <cohort/data/image_folder.hpp>
#endif

namespace {

/// The quick start's training step, on two images: it must run, not only compile.
double quick_start_step(const xt::xtensor<float, 4>& images, const std::vector<std::int32_t>& labels) {
  // clang-format off
  //! [quick start: step]
  Network<ModelA> net(/*seed=*/0);            // PyTorch's default initialisation, seeded
  NllLoss loss;
  Adadelta opt({.lr = 0.5});
  auto logp = net.forward(images);            // xt::xtensor<float, 4> of shape (N, 1, 28, 28)
  loss.forward(logp, labels);
  net.backward(loss.backward());
  opt.step(net);
  //! [quick start: step]
  // clang-format on
  return loss.forward(net.forward(images), labels);
}

// The examples below are compiled, not run (they read the dataset, write files or train for
// minutes); each is the body of a function nobody calls.

[[maybe_unused]] void weights_example() {
  // clang-format off
  //! [weights]
  using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 3>, ReLU, MaxPool2d<2>, Flatten, Linear<1352, 10>>;
  Network<Net> net(/*seed=*/1);
  auto w = net.parameters().view<0, "weight">();   // xtensor view (cohort/tensor/xtensor.hpp), (8, 1, 3, 3)
  save_weights("net.safetensors", net.parameters()); // torch: model.load_state_dict(load_file(...))
  //! [weights]
  // clang-format on
  (void)w;
}

// clang-format off
//! [residual block]
template <std::size_t In, std::size_t Out, std::size_t Stride>
using Block = Residual<Branch<Conv2d<In, Out, 3, Stride, 1, false>, BatchNorm2d<Out>, ReLU,
                              Conv2d<Out, Out, 3, 1, 1, false>, BatchNorm2d<Out>>,
                       Branch<Conv2d<In, Out, 1, Stride, 0, false>, BatchNorm2d<Out>>>;
using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3, 1, 1, false>, BatchNorm2d<16>, ReLU,
                       Block<16, 32, 2>, ReLU, AdaptiveAvgPool2d<1>, Flatten, Linear<32, 10>>;
//! [residual block]
// clang-format on
static_assert(NetworkDescription<Net>);

[[maybe_unused]] void trainer_example() {
  // clang-format off
  //! [trainer]
  using Data = ImageDataset<Shape<1, 28, 28>>;
  const auto norm = Normalization{0.2860f, 0.3530f};
  Data train = Data::load(find_idx_files(default_data_dir, Split::train), 10, norm);
  Data test = Data::load(find_idx_files(default_data_dir, Split::test), 10, norm);
  Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128, .metrics = "run.jsonl"});
  trainer.fit(train, /*epochs=*/2, &test);
  trainer.save("ckpt.safetensors");            // weights + optimiser state + position, atomically
  //! [trainer]
  // clang-format on
}

[[maybe_unused]] void in_memory_example(const std::vector<float>& pixels, const std::vector<std::int32_t>& classes,
                                        const std::vector<std::uint8_t>& bytes) {
  // clang-format off
  //! [in-memory data]
  // pixels: N * 784 normalised floats, classes: N labels in 0..9, from your own pipeline
  ImageView<Shape<1, 28, 28>> view(pixels, classes, 10);             // no copy: keep pixels alive and unchanged
  auto owned = ImageDataset<Shape<1, 28, 28>>::copy_of(pixels, classes, 10);           // or a copy it owns
  auto from_bytes = ImageDataset<Shape<1, 28, 28>>::from_pixels(bytes, std::span<const std::int32_t>(classes), 10,
                                                                Normalization::of(bytes)); // uint8 images, normalised
  Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}));
  trainer.fit(view, /*epochs=*/1);   // ImageDataset<Shape<1, 32, 32>> here would not compile
  //! [in-memory data]
  // clang-format on
  (void)owned, (void)from_bytes;
}

#if defined(COHORT_WITH_IMAGE)
template <class Trainer>
[[maybe_unused]] void image_folder_example(Trainer& trainer) {
  // clang-format off
  //! [image folder]
  using Input = Shape<3, 32, 32>;                                 // the network's input shape
  auto train = ImageFolder<Input>::open("photos/train", {.crop = FolderCrop::random_resized,
                                                         .horizontal_flip = true, .workers = 2});
  auto val = ImageFolder<Input>::open("photos/val", {.resize = 36});   // Resize(36) + CenterCrop(32)
  trainer.fit(train, /*epochs=*/10, &val);   // trainer.class_names() == train.class_names(), saved with checkpoints
  //! [image folder]
  // clang-format on
}
#endif

[[maybe_unused]] void schedule_example() {
  // clang-format off
  //! [schedule]
  Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 1.0}),
                                              {.batch_size = 64, .lr_schedule = LrSchedule::parse("step,step_size=1,gamma=0.7")});
  // train_mnist --model A --optimizer adadelta --lr 1.0 --batch-size 64 --lr-schedule step,step_size=1,gamma=0.7
  //! [schedule]
  // clang-format on
}

[[maybe_unused]] void recipe_example() {
  const auto norm = Normalization{0.2860f, 0.3530f};
  // clang-format off
  //! [recipe]
  TrainerOptions o{.batch_size = 128};
  o.parameter_groups = no_decay_on_norms_and_biases();
  o.lr_schedule = LrSchedule::parse("cosine,warmup=1,start_factor=0.1,t_max=9");
  o.loss = {.label_smoothing = 0.1};
  o.augment = Augmentation{RandomCrop(28, 2, norm), RandomHorizontalFlip()};  // pads with the normalised raw 0
  o.max_grad_norm = 5.0;
  Trainer<models::ResNet20, Sgd<>> trainer(Sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}), o);
  //! [recipe]
  //! [ema]
  o.ema = EmaOptions{.decay = 0.99, .every = 1};   // BatchNorm statistics and counters averaged too
  Trainer<models::ResNet20, Sgd<>> averaged(Sgd({.lr = 0.1, .momentum = 0.9}), o);
  // averaged.evaluate_ema(test) / averaged.evaluate(test): the average's / the last weights' accuracy
  //! [ema]
  //! [lookahead and tta]
  o.test_time_augmentation = TestTimeAugmentation::flip;  // evaluate and predict average x and its mirror
  Lookahead<Sgd<>> opt(Sgd({.lr = 0.1, .momentum = 0.9}), {.k = 5, .alpha = 0.5});
  Trainer<models::ResNet20, Lookahead<Sgd<>>> looking(std::move(opt), o);  // slow weights saved and resumed
  //! [lookahead and tta]
  // clang-format on
}

[[maybe_unused]] void fast_recipe_example() {
  const auto norm = Normalization{0.2860f, 0.3530f};
  // clang-format off
  //! [fast recipe]
  TrainerOptions o{.batch_size = 256, .schedule_per_step = true, .target_accuracy = 93.0};
  o.parameter_groups = no_decay_on_norms_and_biases();
  o.lr_schedule = LrSchedule::parse("onecycle,max_lr=0.2,total_steps=2820,pct_start=0.25,anneal=linear");
  o.loss = {.label_smoothing = 0.1};
  o.augment = Augmentation{RandomCrop(28, 2, norm), RandomHorizontalFlip()};
  o.ema = EmaOptions{.decay = 0.99};  // what fit evaluates after each epoch
  o.test_time_augmentation = TestTimeAugmentation::flip;  // each score averaged with its mirror's
  Trainer<models::FastResNet, Sgd<>> trainer(Sgd({.lr = 0.2, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}), o);
  // trainer.fit(train, /*epochs=*/12, &test): stops after the first epoch at or above 93%
  //! [fast recipe]
  // clang-format on
}

} // namespace

TEST_CASE("README: the quick start's model and training step compile and run") {
  xt::xtensor<float, 4> images = xt::zeros<float>({2, 1, 28, 28});
  images(1, 0, 14, 14) = 1.0f;
  const std::vector<std::int32_t> labels{3, 7};
  const double after = quick_start_step(images, labels);
  CHECK(std::isfinite(after));
  CHECK(after > 0);
}
