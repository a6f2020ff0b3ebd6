// A layer of the user's own, with no ONNX mapping, in a network given to export_onnx.
// expect: export_onnx: layer Index .* has no ONNX mapping
// expect: onnx_layer<LayerType> specialisation
#include <cohort/cohort.hpp>
#include <cohort/io/onnx.hpp>
using namespace cohort;
struct Doubling { // the identity's shape, forward omitted: only its ONNX mapping matters here
  static constexpr std::string_view name = "Doubling";
  static std::string signature() { return std::string(name); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;
  template <class S>
  struct bind : ReLU::bind<S> {
    using layer = Doubling;
  };
};
using Net = Sequential<Input<4>, Linear<4, 4>, Doubling>;
void f(const Network<Net>& net) { export_onnx(net, "never.onnx"); }
