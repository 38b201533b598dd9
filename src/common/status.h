// Status: kolo's one error vocabulary inside the library.
//
// A Status is a code (the same numbers as kolo_status_t at the C boundary), a
// message and the source locations it passed through. Functions that can fail
// return a [[nodiscard]] Status; the check macros in check.h add file:line as an
// error travels up. See Note [Messages and locations].
#pragma once

#include <string>
#include <utility>

namespace kolo {

enum class Code : int {
  kOk = 0,
  kInProgress = 1,
  kInvalidArgument = 2,
  kNotInitialized = 3,
  kAlreadyInitialized = 4,
  kDuplicateName = 5,
  kMismatch = 6,
  kShutdown = 7,
  kTimeout = 8,
  kStalled = 9,
  kUnsupported = 10,
  kTransport = 11,
  kInternal = 12,
  kRankFailed = 13,
  kLast = kRankFailed,  // the highest code (wire decoding checks against it)
};

// The constant name of a code, e.g. "KOLO_ERR_MISMATCH".
const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "KOLO_ERR_X: message".
  std::string to_string() const;

  // The source locations the error passed through, innermost first
  // ("a.cc:12 < b.cc:40"); empty when none was recorded.
  const std::string& where() const { return where_; }

  // to_string() and, if any, " [at <where>]": for debug logging.
  std::string debug_string() const;

  // Returns a copy whose message is prefixed with `context: ` (words for the user).
  Status with_context(const std::string& context) const;

  // Returns a copy with `file:line` added to where() (not to the message).
  Status with_location(const char* file, int line) const;

  // Explicitly discards a status where failure is acceptable (shutdown paths).
  void ignore() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string where_;
};

// Note [Messages and locations]
// A message is what a user reads (kolo_last_error, a handle's message, a Python
// exception, an error in the log); where() is for whoever debugs kolo. Build paths
// in front of a message ("../src/core/coordinator.cc:51: ../src/transport/
// registry.cc:111: KOLO_TRANSPORT=...") bury what the user must change, so the
// check macros record locations beside the message, and the C boundary and the
// coordinator log them at debug level (KOLO_LOG_LEVEL=debug).

inline Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
inline Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status transport_error(std::string m) { return Status(Code::kTransport, std::move(m)); }

}  // namespace kolo
