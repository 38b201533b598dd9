#include "bindings/c/firewall.h"

#include <exception>
#include <new>

#include "common/logging.h"

namespace kolo::c_api {
namespace {

thread_local std::string t_last_error;

}  // namespace

// The user reads the message; where in kolo it arose goes to the debug log (Note
// [Messages and locations]).
kolo_status_t report(const Status& s) {
  if (s.ok()) {
    t_last_error.clear();
  } else {
    t_last_error = s.message();
    if (!s.where().empty()) KOLO_LOG(kDebug) << s.debug_string();
  }
  return static_cast<kolo_status_t>(s.code());
}

kolo_status_t report(Code code, const std::string& message) { return report(Status(code, message)); }

const char* last_error() { return t_last_error.c_str(); }

void record_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const std::bad_alloc&) {
      t_last_error = "out of memory";
    } catch (const std::exception& e) {
      t_last_error = std::string("unexpected exception: ") + e.what();
    } catch (...) {
      t_last_error = "unexpected exception";
    }
  } catch (...) {
    // Building the message itself ran out of memory: a short literal fits the
    // string's inline storage, so this assignment allocates nothing.
    t_last_error.clear();
    t_last_error = "out of memory";
  }
}

}  // namespace kolo::c_api
