#include <doctest/doctest.h>

#include <cstddef>
#include <string>

#include <cohort/core/function_ref.hpp>

using cohort::detail::FunctionRef;

TEST_CASE("detail::FunctionRef: calls the callable it refers to, never a copy of it") {
  int calls = 0;
  std::size_t last = 0;
  auto count = [&calls, &last](std::size_t i) {
    ++calls;
    last = i;
  };
  const FunctionRef<void(std::size_t)> ref(count);
  ref(4);
  ref(7);
  CHECK(calls == 2);
  CHECK(last == 7);

  // A stateful callable: the reference sees its state change between calls (no copy was taken).
  struct Counter {
    int n = 0;
    int operator()(int step) { return n += step; }
  } counter;
  const FunctionRef<int(int)> add(counter);
  CHECK(add(2) == 2);
  counter.n = 10;
  CHECK(add(3) == 13);
  CHECK(counter.n == 13);

  // A result the signature does not want is dropped; arguments are forwarded as declared.
  auto length = [](const std::string& s) { return s.size(); };
  const FunctionRef<void(const std::string&)> ignore(length);
  ignore("four");
  const FunctionRef<std::size_t(const std::string&)> measure(length);
  CHECK(measure("four") == 4);
}
