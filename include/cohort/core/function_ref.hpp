#pragma once
/// \file
/// `detail::FunctionRef<R(Args...)>`: a non-owning reference to a callable, for the thread pools'
/// "run this task on every worker" hand-off, where the caller blocks until the task is done.
/// Its users are backend/cpu/thread_pool.hpp and train/engine/replica_threads.hpp.
/// Example (not compiled: a fragment of those pools):
///
///     auto task = [&](std::size_t i) { ... };
///     pool.run(n, detail::FunctionRef<void(std::size_t)>(task)); // task outlives the call
///
/// Why not `std::function`: every lambda given to ThreadPool::parallel_for (hundreds per
/// program, one per kernel loop) instantiated std::function's invoker and its manager (copy,
/// destroy, typeid): 1.6 MB, 2.1% of the code the test tree's build emitted (issue 32).
/// A FunctionRef is two pointers and one trampoline per callable type; it never copies or owns.

#include <memory>
#include <type_traits>
#include <utility>

namespace cohort::detail {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
  template <class F>
  static constexpr bool accepts =
      !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>;

 public:
  /// Refers to `f`, which must outlive every call through this reference.
  template <class F, std::enable_if_t<accepts<F>, int> = 0>
  FunctionRef(F&& f) noexcept // NOLINT(google-explicit-constructor): a view, like std::string_view
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_(&call<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  template <class Fn>
  static R call(void* object, Args... args) {
    Fn& fn = *static_cast<Fn*>(object);
    if constexpr (std::is_void_v<R>)
      fn(std::forward<Args>(args)...); // (a result, if any, is dropped)
    else
      return fn(std::forward<Args>(args)...);
  }

  void* object_;
  R (*call_)(void*, Args...);
};

} // namespace cohort::detail
