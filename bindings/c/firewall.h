// The C API's firewall: what every entry point of kolo.h goes through, so that no
// exception crosses the ABI and every refusal leaves a message for
// kolo_last_error(). Even entry points that cannot throw today go through it, so
// that a change behind them cannot break kolo.h's promise.
//
// Callers: the extern "C" functions in c_api*.cc and build_info.cc, on any user
// thread. The last error is thread-local: each thread sees the message of its own
// last failed call.
#pragma once

#include <string>

#include "common/status.h"
#include "kolo/kolo.h"

namespace kolo::c_api {

// Records `s` as the calling thread's last error ("" for OK) and returns its code.
kolo_status_t report(const Status& s);
kolo_status_t report(Code code, const std::string& message);

// The calling thread's last error message.
const char* last_error();

// Records the exception being handled (call only inside a catch block) as the
// calling thread's last error. Never throws, even when out of memory.
void record_current_exception() noexcept;

// Runs f() and returns its result; if it throws, records the exception and
// returns `on_exception` instead (KOLO_ERR_INTERNAL for a status).
template <typename T, typename F>
T guarded(T on_exception, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    record_current_exception();
    return on_exception;
  }
}

template <typename F>
kolo_status_t guarded(F&& f) noexcept {
  return guarded(KOLO_ERR_INTERNAL, static_cast<F&&>(f));
}

}  // namespace kolo::c_api
