#include <doctest/doctest.h>

#include <cohort/core/dtype.hpp>
#include <cohort/core/shape.hpp>

using namespace cohort;

static_assert(Shape<1, 28, 28>::rank == 3);
static_assert(Shape<1, 28, 28>::size == 784);
static_assert(Shape<10>::extents[0] == 10);
static_assert(ImageShape<Shape<3, 4, 5>>);
static_assert(!ImageShape<Shape<60>>);
static_assert(!ShapeType<InvalidShape>);
static_assert(detail::extent_or_zero<Shape<7>, 2>() == 0);
static_assert(std::is_same_v<Input<1, 2, 3>::shape, Shape<1, 2, 3>>);
static_assert(dtype_of<float> == DType::f32 && dtype_size(DType::bf16) == 2);
static_assert(std::is_same_v<accumulator_t<double>, double> && std::is_same_v<accumulator_t<float>, float>);

TEST_CASE("Shape: prints as CxHxW") {
  CHECK(Shape<1, 28, 28>::str() == "1x28x28");
  CHECK(Shape<10>::str() == "10");
}

TEST_CASE("DType: safetensors names round-trip") {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i16, DType::i8,
                  DType::u8, DType::boolean}) {
    const auto back = dtype_from_name(dtype_name(t));
    REQUIRE(back.has_value());
    CHECK(*back == t);
  }
  CHECK_FALSE(dtype_from_name("F8_E4M3").has_value());
}
