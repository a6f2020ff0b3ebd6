#pragma once
/// \file
/// Host memory that grows but never shrinks: the storage behind parameters, gradients and
/// activations on the CPU backend.
/// Example (compiled: tests/docs/headers.cpp, "tensor/buffer"):
///
///     cohort::HostBuffer<float> b;
///     b.resize(1024);   // allocates
///     b.resize(512);    // no allocation: capacity is kept, so a short last batch costs nothing
///     b.resize(1024);   // still no allocation

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace cohort {

/// Alignment of every buffer and of every tensor inside a flat parameter store: one cache line,
/// and a whole AVX-512 register.
inline constexpr std::size_t buffer_alignment = 64;

/// Where HostBuffer's memory comes from: aligned operator new. A backend may supply another
/// (the Cuda backend's page-locked memory for staging batches: gpu::PinnedAllocator), with the
/// same two static members.
struct AlignedAllocator {
  static void* allocate(std::size_t bytes) { return ::operator new (bytes, std::align_val_t{buffer_alignment}); }
  static void deallocate(void* p, std::size_t /*bytes*/) noexcept {
    ::operator delete (p, std::align_val_t{buffer_alignment});
  }
};

/// A 64-byte aligned, growable array of trivially copyable `T`, from `Alloc`. New elements are
/// zeroed.
template <class T, class Alloc = AlignedAllocator>
class HostBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "HostBuffer holds trivially copyable elements only");

 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t n) { resize(n); }
  HostBuffer(const HostBuffer& other) { *this = other; }
  HostBuffer(HostBuffer&& other) noexcept { swap(other); }
  HostBuffer& operator=(const HostBuffer& other) {
    if (this != &other) {
      resize(other.size_);
      if (size_) std::memcpy(data_, other.data_, size_ * sizeof(T));
    }
    return *this;
  }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    HostBuffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  ~HostBuffer() { release(); }

  void swap(HostBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  /// Sets the size; reallocates (keeping the contents) only when `n` exceeds the capacity.
  void resize(std::size_t n) {
    if (n > capacity_) {
      T* fresh = allocate(n);
      if (size_) std::memcpy(fresh, data_, size_ * sizeof(T));
      std::memset(static_cast<void*>(fresh + size_), 0, (n - size_) * sizeof(T));
      release();
      data_ = fresh;
      capacity_ = n;
    } else if (n > size_) {
      std::memset(static_cast<void*>(data_ + size_), 0, (n - size_) * sizeof(T));
    }
    size_ = n;
  }
  /// Grows the capacity to at least `n` without changing the size.
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    const std::size_t keep = size_;
    resize(n);
    size_ = keep;
  }
  void fill(T value) { std::fill(data_, data_ + size_, value); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  std::span<T> span() noexcept { return {data_, size_}; }
  std::span<const T> span() const noexcept { return {data_, size_}; }

 private:
  // Round the byte count up so that vector loops may read a whole register past the end.
  static std::size_t bytes_for(std::size_t n) noexcept {
    return (n * sizeof(T) + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
  }
  static T* allocate(std::size_t n) { return static_cast<T*>(Alloc::allocate(bytes_for(n))); }
  void release() noexcept {
    if (data_) Alloc::deallocate(data_, bytes_for(capacity_));
    data_ = nullptr;
    size_ = capacity_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

} // namespace cohort
