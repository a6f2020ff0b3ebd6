// A dataset type that says nothing of its sample shape: refused, with the two ways to say it.
// expect: a dataset must state its sample shape: `using shape = cohort::Shape<C, H, W>;`
#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cstdint>
#include <vector>
using namespace cohort;
struct Unshaped {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  std::size_t size() const { return y.size(); }
  const float* image(std::size_t i) const { return x.data() + i * 784; }
  std::int32_t label(std::size_t i) const { return y[i]; }
};
void train(const Unshaped& d) {
  Trainer<models::ModelA, Adadelta<>> t(Adadelta({.lr = 0.5}));
  t.fit(d, 1);
}
