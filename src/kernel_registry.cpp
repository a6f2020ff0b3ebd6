// The networks whose CPU kernels the compiled kernel library (cohort::kernels) holds.
//
// Not part of any build: scripts/compiled_kernels.py compiles this file header-only at -O0,
// reads the kernel entry points it instantiated from the object's symbols, and writes them to
// include/cohort/backend/cpu/compiled_instances.hpp, which the library instantiates once
// (src/cpu_kernels_*.cpp) and every translation unit built in compiled mode declares `extern
// template`. A network listed here trains in any precision without compiling one of its
// kernels again; any other network compiles its own, exactly as header-only.
//
// To add networks, list them below and run `scripts/compiled_kernels.py` (it rewrites the
// header; CI's kernels.registry_complete test fails when a listed network's kernels are missing).
#include <cohort/cohort.hpp>
#include <cohort/models/fast_resnet.hpp>
#include <cohort/models/mobilenet_v2.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/mixed_precision.hpp>

namespace {

using namespace cohort;

// Every kernel a Trainer of Net calls: training steps (with and without fusion, which the
// executor chooses from the types alone), evaluation.
template <class Net, class Precision>
void instantiate_kernels(const ImageDataset<Shape<1, 28, 28>>& data) {
  Trainer<Net, Sgd<>, SingleDevice<>, Precision> trainer(Sgd({.lr = 0.1}), {});
  trainer.fit(data, 1, &data);
  (void)trainer.evaluate(data);
}

template <class Net>
void instantiate_all_precisions(const ImageDataset<Shape<1, 28, 28>>& data) {
  instantiate_kernels<Net, FullPrecision>(data);
  instantiate_kernels<Net, MixedPrecision<bf16>>(data);
  instantiate_kernels<Net, MixedPrecision<fp16>>(data);
}

} // namespace

void cohort_kernel_registry(const cohort::ImageDataset<cohort::Shape<1, 28, 28>>& data) {
  using namespace cohort::models;
  instantiate_all_precisions<ModelA>(data);
  instantiate_all_precisions<ModelB>(data);
  instantiate_all_precisions<ModelC>(data);
  instantiate_all_precisions<ModelD>(data);
  instantiate_all_precisions<ResNet20>(data);
  instantiate_all_precisions<FastResNet>(data);
  instantiate_all_precisions<MobileNetV2Small<>>(data);
}
