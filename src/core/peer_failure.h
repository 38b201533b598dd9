// The one place where the core learns that a peer rank has failed.
//
// A dead or silent peer reaches the coordinator as a Status with
// Code::kRankFailed, from the control plane's liveness check (ControlPlane::
// check_peers), a negotiation, or a transport. The coordinator then calls
// peer_failed() once, on its thread, before it fails every pending handle with
// that status and stops. peer_failed() logs the failure and runs the hooks
// registered here (e.g. a diagnostic dump), in registration order.
#pragma once

#include <functional>

#include "common/status.h"

namespace kolo::core {

using PeerFailureHook = std::function<void(const Status& failure)>;

// Any thread; hooks stay registered for the life of the process.
void add_peer_failure_hook(PeerFailureHook hook);

// Coordinator thread: logs `failure` (an error naming the ranks) and runs the hooks.
void peer_failed(const Status& failure);

}  // namespace kolo::core
