#pragma once
/// \file
/// Minimal type-list machinery for Sequential.

#include <cstddef>
#include <type_traits>

namespace cohort::detail {

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class T, class List>
struct prepend;
template <class T, class... Ts>
struct prepend<T, type_list<Ts...>> {
  using type = type_list<T, Ts...>;
};

template <std::size_t I, class List>
struct at;
template <class T, class... Ts>
struct at<0, type_list<T, Ts...>> {
  using type = T;
};
template <std::size_t I, class T, class... Ts>
struct at<I, type_list<T, Ts...>> {
  using type = typename at<I - 1, type_list<Ts...>>::type;
};
template <std::size_t I, class List>
using at_t = typename at<I, List>::type;

template <class>
inline constexpr bool dependent_false = false;

} // namespace cohort::detail
