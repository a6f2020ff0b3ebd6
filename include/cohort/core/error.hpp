#pragma once
/// \file
/// The exception hierarchy: every run-time failure the library reports is a `cohort::Error`.
///
///     try { net.forward(x); } catch (const cohort::ShapeError& e) { std::cerr << e.what(); }
///
/// Messages name the thing at fault (file, layer, rank, tensor), what was expected and what
/// was found, so a user can act on them without a debugger.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace cohort {

/// Base of every exception cohort throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A run-time shape (usually batch tensor) does not match what the network was built for.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A value given by the user is out of range: a label >= the number of classes, lr < 0, ...
class ValueError : public Error {
 public:
  using Error::Error;
};

/// A file could not be opened, read, written or renamed.
class IoError : public Error {
 public:
  using Error::Error;
};

/// A file was read but its content is not what the format requires (bad magic, truncated,
/// inconsistent header, tensor of the wrong shape).
class FormatError : public IoError {
 public:
  using IoError::IoError;
};

/// A checkpoint that cannot be loaded into this network/optimiser: missing or unexpected
/// tensors, wrong shapes or dtypes, another optimiser. Nothing is changed when it is thrown.
class CheckpointError : public FormatError {
 public:
  using FormatError::FormatError;
};

/// Ranks or replicas that cannot go on together: a collective operation failed or did not finish
/// within its deadline, the ranks built different networks or policies, or the launch
/// environment (rank, world size) is inconsistent. The message names the rank(s), the
/// operation and the step.
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// A device backend failed: a device allocation, a Thrust algorithm, a CUDA, cuBLAS or NCCL call
/// (the Cuda backend's CudaError is one). The message names the operation and the device.
class DeviceError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Builds a message from streamable pieces: `concat("expected ", 3, ", found ", 4)`.
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

} // namespace detail
} // namespace cohort
