// What the C API's files share: the runtime kolo_init made, the lock of the
// lifecycle, and the two refusals every entry point uses (c_api.cc defines them).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "bindings/c/firewall.h"
#include "core/runtime.h"
#include "kolo/kolo.h"

namespace kolo::c_api {

extern std::mutex g_lifecycle_mu;                 // kolo_init / kolo_shutdown
extern std::unique_ptr<core::Runtime> g_runtime;  // set while initialised

kolo_status_t not_initialized();
kolo_status_t invalid(const std::string& message);

}  // namespace kolo::c_api

// What a kolo_handle_t points to (c_api_collectives.cc makes them,
// c_api_handles.cc reads and releases them): the user's share of the
// operation's state.
struct kolo_handle {
  std::shared_ptr<kolo::core::HandleState> state;
};
