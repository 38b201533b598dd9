// Backoff is the former name of Waiter (common/wait_policy.h), kept only so that
// transports/mpi and its tests build unchanged while they move to the node layer
// (transports/shm). New code names Waiter and a WaitFor profile; delete this
// header once nothing includes it.
#pragma once

#include "common/wait_policy.h"

namespace kolo {

using Backoff = Waiter;

}  // namespace kolo
