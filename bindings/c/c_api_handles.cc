// The C API's handle functions (include/kolo/kolo.h): poll, wait, status, message,
// output, phases, splits, stream_wait, release. Every entry point runs inside
// guarded() (firewall.h), as in c_api.cc; a NULL handle is refused by name.
#include <cmath>
#include <string>

#include "bindings/c/c_api_state.h"
#include "bindings/c/firewall.h"
#include "common/status.h"
#include "core/handle.h"
#include "core/runtime.h"
#include "kolo/kolo.h"

namespace {

using kolo::Code;
using kolo::Status;
using kolo::c_api::g_runtime;
using kolo::c_api::guarded;
using kolo::c_api::invalid;
using kolo::c_api::not_initialized;
using kolo::c_api::report;

// The handle functions' common check: a NULL handle is refused by name.
bool check_handle(kolo_handle_t handle) {
  if (handle != nullptr) return true;
  invalid("handle is NULL");
  return false;
}

// kolo_wait's timeout as HandleState::wait takes it: NaN is refused; one too large
// for the clock (over ~30 years, or infinite) waits forever, as a negative one does.
bool wait_seconds(double timeout_seconds, double* seconds) {
  if (std::isnan(timeout_seconds)) {
    invalid("timeout_seconds is NaN (use a negative timeout to wait forever)");
    return false;
  }
  constexpr double kForever = 1e9;
  *seconds = timeout_seconds > kForever ? -1.0 : timeout_seconds;
  return true;
}

}  // namespace

extern "C" {

kolo_status_t kolo_poll(kolo_handle_t handle, int* done) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    if (done == nullptr) return invalid("done is NULL");
    *done = handle->state->done() ? 1 : 0;
    return KOLO_OK;
  });
}

kolo_status_t kolo_wait(kolo_handle_t handle, double timeout_seconds) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    double seconds = 0;
    if (!wait_seconds(timeout_seconds, &seconds)) return KOLO_ERR_INVALID_ARGUMENT;
    if (!handle->state->wait(seconds))
      return report(Code::kTimeout, "the operation did not complete within " +
                                        std::to_string(timeout_seconds) + " s");
    return report(Status(handle->state->code(), handle->state->message()));
  });
}

kolo_status_t kolo_handle_status(kolo_handle_t handle) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    return static_cast<kolo_status_t>(handle->state->code());
  });
}

const char* kolo_handle_message(kolo_handle_t handle) {
  return guarded("", [&] { return handle ? handle->state->message().c_str() : ""; });
}

kolo_status_t kolo_handle_output(kolo_handle_t handle, const void** data, int64_t* bytes) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    if (!handle->state->done()) return invalid("the operation has not completed yet");
    if (data) *data = handle->state->output.data();
    if (bytes) *bytes = static_cast<int64_t>(handle->state->output.size());
    return KOLO_OK;
  });
}

kolo_status_t kolo_handle_phases(kolo_handle_t handle, int64_t* ns, int n) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    if (n < 0) return invalid("n is negative (" + std::to_string(n) + "): the length of ns");
    if (ns == nullptr && n > 0)
      return invalid("ns is NULL (it must have room for n = " + std::to_string(n) + " values)");
    if (!handle->state->done()) return invalid("the operation has not completed yet");
    static_assert(kolo::core::HandleState::kNumPhases == KOLO_NUM_PHASES);
    const auto& phases = handle->state->phases();
    for (int i = 0; i < n && i < KOLO_NUM_PHASES; ++i) ns[i] = phases[static_cast<size_t>(i)];
    return KOLO_OK;
  });
}

kolo_status_t kolo_handle_splits(kolo_handle_t handle, int64_t* splits, int n) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    if (n < 0) return invalid("n is negative (" + std::to_string(n) + "): the length of splits");
    if (splits == nullptr && n > 0)
      return invalid("splits is NULL (it must have room for n = " + std::to_string(n) + " values)");
    if (!handle->state->done()) return invalid("the operation has not completed yet");
    const auto& s = handle->state->splits;
    for (int i = 0; i < n && i < static_cast<int>(s.size()); ++i) splits[i] = s[i];
    return KOLO_OK;
  });
}

kolo_status_t kolo_handle_stream_wait(kolo_handle_t handle, void* stream) {
  return guarded([&] {
    if (!check_handle(handle)) return KOLO_ERR_INVALID_ARGUMENT;
    if (!g_runtime) return not_initialized();
    return report(g_runtime->stream_wait(*handle->state, stream));
  });
}

void kolo_handle_release(kolo_handle_t handle) {
  guarded(0, [&] {
    delete handle;
    return 0;
  });
}

}  // extern "C"
