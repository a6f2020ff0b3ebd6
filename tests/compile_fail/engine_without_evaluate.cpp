// A parallel policy of one's own whose engine does not provide evaluate(): the Trainer names the
// engine protocol and the missing requirement instead of failing inside its training loop.
// expect: does not satisfy cohort::TrainEngineProtocol
// expect: e.evaluate\(x, labels\)
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
using namespace cohort;
struct OwnPolicy {
  using backend = Cpu;
  static constexpr std::string_view name = "OwnPolicy";
  static constexpr std::size_t replicas = 1;
};
// SingleDevice's engine with evaluate() hidden.
template <class Precision, class Net, class Opt>
class cohort::detail::TrainEngine<OwnPolicy, Precision, Net, Opt>
    : public cohort::detail::TrainEngine<SingleDevice<>, Precision, Net, Opt> {
 public:
  using cohort::detail::TrainEngine<SingleDevice<>, Precision, Net, Opt>::TrainEngine;
  void evaluate() = delete;
};
Trainer<models::ModelC, Sgd<>, OwnPolicy> trainer(Sgd({.lr = 0.1}));
