// Helper of tests/reference/torchvision_resnet.py: torchvision's ResNet-18 in cohort, by
// torchvision's names (models/torchvision_resnet.hpp).
//
//   torchvision_resnet logits WEIGHTS X OUT
//       models::ResNet18<> loaded strictly from a torchvision state_dict through torchvision_names;
//       eval-mode logits of X written to OUT ("y")
//   torchvision_resnet logits34 WEIGHTS X OUT
//       the same with models::ResNet34<> (torchvision.models.resnet34())
//   torchvision_resnet train WEIGHTS X LABELS STEPS OUT
//       the same network, STEPS SGD steps (lr 0.001, momentum 0.9, weight decay 1e-4, train mode)
//       on the batch; OUT: the weights under torchvision's names and the losses ("loss")
//   torchvision_resnet head-init OUT
//       the 10-class head a fresh ResNet18<10> (seed 0, the Trainer's default) starts with,
//       under torchvision's names (fc.weight, fc.bias)
//   torchvision_resnet finetune X LABELS OUT    (in the directory holding resnet18.safetensors)
//       the README's fine-tuning example as printed: a Trainer on ResNet18<10> with layers 0-21
//       frozen starts from the 1000-class file without its head (non-strict: fc.* unexpected, the
//       new head missing, both checked), trains 3 epochs of the batch held in memory
//       (ImageView: one step each), predicts, and writes tuned.safetensors (torchvision's names)
//       and tuned.onnx there; OUT: predict()'s scores ("y")

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/io/onnx.hpp>
#include <cohort/models/torchvision_resnet.hpp>

#include "support/torchvision_reference.hpp"

using namespace cohort;

namespace {
using In = Shape<3, 224, 224>;

using test::labels_of;

template <class Net>
int logits(char** argv) {
  test::write_eval_output(*test::loaded_network<Net>(argv[2], models::torchvision_names<Net>()), argv[3], argv[4]);
  return 0;
}

int train(char** argv) {
  using Net = models::ResNet18<>;
  const auto x = SafetensorsFile::read(argv[3]).values<float>("x");
  auto net = test::loaded_network<Net>(argv[2], models::torchvision_names<Net>());
  test::train_and_save(*net, x, labels_of(argv[4]), std::stoul(argv[5]),
                       {.lr = 0.001, .momentum = 0.9, .weight_decay = 1e-4}, models::torchvision_names<Net>(), argv[6]);
  return 0;
}

/// The new head's initial weights (ResNet18<10> as a Trainer with seed 0 starts it), under
/// torchvision's names: torch's fine-tune starts from the same head.
int head_init(char** argv) {
  using Net = models::ResNet18<10>;
  auto net = std::make_unique<Network<Net>>(/*seed=*/0);
  save_weights(argv[2], net->parameters(), inverted(models::torchvision_names<Net>()));
  return 0;
}

/// The README's fine-tuning example, run as it is printed there, in the working directory that
/// holds resnet18.safetensors; the batch (x, labels) stands for the user's data.
int finetune(char** argv) {
  const auto x = SafetensorsFile::read(argv[2]).values<float>("x");
  const auto labels = labels_of(argv[3]);
  const ImageView<In> train(x, labels, 10);
  const std::vector<float>& images = x;
  // clang-format off
  //! [fine-tuning]
  using Net = models::ResNet18<10>;   // torchvision's ResNet-18 with a 10-class head
  Trainer<Net, Sgd<>> trainer(Sgd({.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4}),
                              {.batch_size = 32, .freeze = Freeze::below(22)});   // layers 0..21: the backbone
  // torchvision.models.resnet18().state_dict(), saved with safetensors.torch.save_file:
  LoadReport r = trainer.init_from("resnet18.safetensors",
                                   {.rename = models::torchvision_names<Net>(/*head=*/false), .strict = false});
  // r.unexpected: fc.bias, fc.weight (the 1000-class head); r.missing: 22.bias, 22.weight (the new one)
  trainer.fit(train, /*epochs=*/3);   // the head trains; the backbone stays as loaded, BatchNorm statistics too
  std::vector<float> p = trainer.predict(images);   // N x 10 scores, eval mode (or Prediction::probabilities)
  save_weights("tuned.safetensors", trainer.parameters(), inverted(models::torchvision_names<Net>()));
  export_onnx(trainer.parameters(), "tuned.onnx");   // #include <cohort/io/onnx.hpp>
  //! [fine-tuning]
  // clang-format on
  std::sort(r.unexpected.begin(), r.unexpected.end()); // the file's order is its own
  std::sort(r.missing.begin(), r.missing.end());
  if (r.unexpected != std::vector<std::string>{"fc.bias", "fc.weight"} ||
      r.missing != std::vector<std::string>{"22.bias", "22.weight"}) {
    std::fprintf(stderr, "torchvision_resnet: unexpected load report (%zu missing, %zu unexpected)\n", r.missing.size(),
                 r.unexpected.size());
    return 1;
  }
  SafetensorsWriter w;
  w.add<float>("y", {labels.size(), 10}, p);
  w.write(argv[4]);
  return 0;
}
} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "logits" && argc == 5) return logits<models::ResNet18<>>(argv);
    if (mode == "logits34" && argc == 5) return logits<models::ResNet34<>>(argv);
    if (mode == "train" && argc == 7) return train(argv);
    if (mode == "head-init" && argc == 3) return head_init(argv);
    if (mode == "finetune" && argc == 5) return finetune(argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "torchvision_resnet: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: torchvision_resnet logits|logits34 WEIGHTS X OUT | train WEIGHTS X LABELS STEPS OUT | "
                       "head-init OUT | finetune X LABELS OUT (in the directory of resnet18.safetensors)\n");
  return 2;
}
