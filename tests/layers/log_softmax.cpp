#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

TEST_CASE("LogSoftmax: matches PyTorch, stable for logits of +-80") {
  check_layer_fixture<LogSoftmax, Shape<10>>("layer_log_softmax");
}
TEST_CASE("LogSoftmax: gradients match finite differences") { gradcheck_layer<LogSoftmax, Shape<7>>(3, Mode::train); }
