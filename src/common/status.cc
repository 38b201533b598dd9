#include "common/status.h"

namespace kolo {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "KOLO_OK";
    case Code::kInProgress: return "KOLO_IN_PROGRESS";
    case Code::kInvalidArgument: return "KOLO_ERR_INVALID_ARGUMENT";
    case Code::kNotInitialized: return "KOLO_ERR_NOT_INITIALIZED";
    case Code::kAlreadyInitialized: return "KOLO_ERR_ALREADY_INITIALIZED";
    case Code::kDuplicateName: return "KOLO_ERR_DUPLICATE_NAME";
    case Code::kMismatch: return "KOLO_ERR_MISMATCH";
    case Code::kShutdown: return "KOLO_ERR_SHUTDOWN";
    case Code::kTimeout: return "KOLO_ERR_TIMEOUT";
    case Code::kStalled: return "KOLO_ERR_STALLED";
    case Code::kUnsupported: return "KOLO_ERR_UNSUPPORTED";
    case Code::kTransport: return "KOLO_ERR_TRANSPORT";
    case Code::kInternal: return "KOLO_ERR_INTERNAL";
    case Code::kRankFailed: return "KOLO_ERR_RANK_FAILED";
  }
  return "KOLO_ERR_UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "KOLO_OK";
  return std::string(code_name(code_)) + ": " + message_;
}

std::string Status::debug_string() const {
  return where_.empty() ? to_string() : to_string() + " [at " + where_ + "]";
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  Status s(code_, context + ": " + message_);
  s.where_ = where_;
  return s;
}

Status Status::with_location(const char* file, int line) const {
  if (ok()) return *this;
  Status s = *this;
  s.where_ += (where_.empty() ? "" : " < ") + std::string(file) + ":" + std::to_string(line);
  return s;
}

}  // namespace kolo
