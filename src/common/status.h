// Status: kolo's one error vocabulary inside the library.
//
// A Status is a code (the same numbers as kolo_status_t at the C boundary) and a
// message. Functions that can fail return a [[nodiscard]] Status; the check macros
// in check.h add file:line as an error travels up.
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

  // Returns a copy whose message is prefixed with `context: `.
  Status with_context(const std::string& context) const;

  // Explicitly discards a status where failure is acceptable (shutdown paths).
  void ignore() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
inline Status internal_error(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status transport_error(std::string m) { return Status(Code::kTransport, std::move(m)); }

}  // namespace kolo
