// TrainerOptions::freeze under the CPU policies and precisions: the frozen backbone's parameters,
// running statistics and optimiser state stay as initialised while the head trains; eval_mode
// false lets the statistics move; a frozen run resumes exactly into a trainer built with another
// seed; a bad freeze is refused when the trainer is built. (ThrustDevice: tests/backend/device/
// trainer_cases.hpp; ProcessGroupDDP: tests/mpi/ddp_check.cpp.)

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/temp_dir.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using FreezeNet = models::ModelB; // 0 conv 1 bn 2 relu 3 pool 4 conv 5 bn 6 relu 7 pool 8 flatten 9 linear
constexpr std::size_t head = 9;

/// Parameters, running statistics and SGD's momentum after training.
struct Outcome {
  std::vector<float> values, buffers, momentum;
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

template <class Policy, class Precision = FullPrecision>
Outcome run(const Freeze& freeze, std::uint64_t steps, const std::filesystem::path& save = {},
            const std::filesystem::path& resume = {}) {
  static const Bands data(100, 1);
  Trainer<FreezeNet, Sgd<>, Policy, Precision> t(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-3}),
                                                 {.batch_size = 24,
                                                  .seed = resume.empty() ? train_seed : resume_seed,
                                                  .max_steps = steps,
                                                  .log = nullptr,
                                                  .freeze = freeze});
  if (!resume.empty()) resume_checked(t, resume);
  t.fit(data, 10);
  if (!save.empty()) t.save(save);
  auto& p = t.parameters();
  const auto m = t.optimizer().slots(p.values.size())[0].values;
  return {{p.values.begin(), p.values.end()}, {p.buffers.span().begin(), p.buffers.span().end()}, {m.begin(), m.end()}};
}

std::vector<float> slice(const std::vector<float>& store, std::size_t first, std::size_t last) {
  return {store.begin() + std::ptrdiff_t(FreezeNet::layout.param_base[first]),
          store.begin() + std::ptrdiff_t(FreezeNet::layout.param_base[last])};
}

/// The backbone (layers 0..7) is as initialised, with no momentum; the head moved.
void check_head_only(const Outcome& o, bool statistics_kept) {
  Parameters<FreezeNet, float, Cpu> init;
  init.initialize(train_seed);
  const std::vector<float> v0(init.values.begin(), init.values.end());
  CHECK(slice(o.values, 0, head) == slice(v0, 0, head));
  CHECK(slice(o.values, head, head + 1) != slice(v0, head, head + 1));
  const auto m = slice(o.momentum, 0, head);
  CHECK(std::all_of(m.begin(), m.end(), [](float x) { return x == 0.f; }));
  const std::vector<float> b0(init.buffers.span().begin(), init.buffers.span().end());
  CHECK((o.buffers == b0) == statistics_kept);
}
} // namespace

TEST_CASE("Trainer freeze: the backbone stays as initialised under SingleDevice, ThreadedReplicas and bf16") {
  check_head_only(run<SingleDevice<>>(Freeze::below(head), 6), true);
  check_head_only(run<ThreadedReplicas<2>>(Freeze::below(head), 6), true);
  check_head_only(run<SingleDevice<>, MixedPrecision<bf16>>(Freeze::below(head), 6), true);
  // requires_grad_(False) without eval(): the statistics follow the batches, the weights stay.
  check_head_only(run<SingleDevice<>>(Freeze::below(head, /*eval_mode=*/false), 6), false);
}

TEST_CASE("Trainer freeze: a frozen run resumes exactly into a trainer built with another seed") {
  TempDir dir("cohort_freeze_resume_");
  const Freeze f = Freeze::names({"0", "1", "4", "5"}); // the convolutions and BatchNorms by name
  const Outcome straight = run<SingleDevice<>>(f, 8);
  run<SingleDevice<>>(f, 3, dir.path / "half.safetensors");
  CHECK(run<SingleDevice<>>(f, 8, {}, dir.path / "half.safetensors") == straight);
  check_head_only(straight, true);
}

TEST_CASE("Trainer freeze: a freeze that names nothing, or leaves nothing to train, is refused at construction") {
  const auto refused = [](const Freeze& f) -> std::string {
    try {
      Trainer<FreezeNet, Sgd<>> t(Sgd({.lr = 0.1}), {.log = nullptr, .freeze = f});
    } catch (const ValueError& e) {
      return e.what();
    }
    return "(built)";
  };
  CHECK(refused(Freeze::names({"conv1"})).starts_with("Freeze: prefix 'conv1' matches no layer of the network"));
  CHECK(refused(Freeze::below(10)).ends_with("which leaves no parameter to train (torch: no tensor requires grad)"));
}
