#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>

#include <cohort/core/error.hpp>

namespace {
struct Streamed {
  int value;
};
std::ostream& operator<<(std::ostream& os, const Streamed& s) { return os << "Streamed(" << s.value << ")"; }
} // namespace

TEST_CASE("detail::concat: every part in order, each through its own operator<<, as one ostream would write them") {
  using cohort::detail::concat;
  const std::string s = "text";
  const std::string_view sv = "view";
  const char* c_string = "c-string";
  char buffer[8] = "buffer"; // a char array that is not a literal
  // The reference: the same parts written into one ostringstream by hand.
  std::ostringstream os;
  os << "expected " << 3 << ", found " << 4.5 << ' ' << s << sv << c_string << buffer << std::size_t(7) << Streamed{9}
     << true << -1.0f / 3 << std::int8_t(65) << nullptr << 1e-300 << "";
  CHECK(concat("expected ", 3, ", found ", 4.5, ' ', s, sv, c_string, buffer, std::size_t(7), Streamed{9}, true,
               -1.0f / 3, std::int8_t(65), nullptr, 1e-300, "") == os.str());
  CHECK(concat("expected ", 3, ", found ", 4.5) == "expected 3, found 4.5");
  CHECK(concat() == "");
  CHECK(concat("a", "bc", "def") == "abcdef"); // literals of three lengths, one writer
  CHECK(concat(std::nan("")).find("nan") != std::string::npos);
}
