#pragma once
/// \file
/// The exception hierarchy: every run-time failure the library reports is a `cohort::Error`.
/// Example (compiled: tests/docs/headers.cpp, "core/error"):
///
///     try { net.forward(x); } catch (const cohort::ShapeError& e) { std::cerr << e.what(); }
///
/// Messages name the thing at fault (file, layer, rank, tensor), what was expected and what
/// was found, so a user can act on them without a debugger.

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
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

/// A file's stored checksum does not match its content (a flipped bit on disk or in transit), or
/// the checksums a cohort file carries are incomplete or malformed. The message names the file,
/// the tensor (or "the header") and the expected and found CRC32C. Nothing is loaded.
class ChecksumError : public FormatError {
 public:
  using FormatError::FormatError;
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

/// One piece of a message: its address and the function that streams its type.
struct MessagePart {
  const void* value;
  void (*write)(std::ostream&, const void*);
};

template <class T>
void write_message_part(std::ostream& os, const void* value) {
  os << *static_cast<const T*>(value);
}

inline void write_message_text(std::ostream& os, const void* value) { os << static_cast<const char*>(value); }

/// The streamer of a part of type T; string literals (`char[N]`, one type per length) share one.
template <class T>
constexpr auto message_part_writer() {
  if constexpr (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>)
    return &write_message_text;
  else
    return &write_message_part<T>;
}

/// The one ostringstream every message is built in (not inlined into its callers).
[[gnu::noinline]] inline std::string concat_parts(std::initializer_list<MessagePart> parts) {
  std::ostringstream os;
  for (const MessagePart& p : parts) p.write(os, p.value);
  return os.str();
}

/// Builds a message from streamable pieces: `concat("expected ", 3, ", found ", 4)`, each piece
/// written by its type's `operator<<`, in order, into one ostringstream.
/// Why not `(os << ... << parts)`: that inlined an ostringstream and the whole chain at each of
/// the argument lists a program instantiates: 3,917 of them, 3.3% of the code the test tree's
/// build emitted (issue 32); here each list is an array of (address, streamer) pairs and one call.
template <class... Parts>
std::string concat(const Parts&... parts) {
  return concat_parts({MessagePart{static_cast<const void*>(std::addressof(parts)), message_part_writer<Parts>()}...});
}

/// Text taken from a file, safe to put in a message: printable ASCII is kept, `"` and `\` are
/// escaped, every other byte is written `\xNN`, and more than `max_bytes` are cut (saying how
/// many there were). A corrupt header must not put raw bytes (invalid UTF-8, terminal escape
/// sequences) on a user's terminal or into a log. Every file-derived string in a message goes
/// through this helper.
///
///     escaped("a\xff\"b")   // a\xff\"b
inline std::string escaped(std::string_view s, std::size_t max_bytes = 200) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  const std::size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n + 8);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  if (n < s.size()) out += concat("... (", s.size(), " bytes in all)");
  return out;
}

/// `"text"` with the text escaped: how messages quote a name or value read from a file.
inline std::string in_quotes(std::string_view s) {
  std::string out(1, '"');
  out += escaped(s);
  out += '"';
  return out;
}

/// Names read from files or directories, each in_quotes, comma-separated; a long list shows its
/// first six and the count ("a", "b", ... (12 in all)) so a message stays one line.
template <class Strings>
std::string quoted_list(const Strings& names) {
  std::string s;
  std::size_t i = 0;
  for (const auto& n : names) {
    if (i == 6 && std::size(names) > 8) return s + concat(", ... (", std::size(names), " in all)");
    s += (i++ ? ", " : "") + in_quotes(n);
  }
  return s;
}

} // namespace detail
} // namespace cohort
