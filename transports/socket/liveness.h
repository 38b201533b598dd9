// The socket world's Liveness is the shared one (src/transport/liveness.h).
#pragma once

#include "transport/liveness.h"

namespace kolo::socket {

using transport::Liveness;

}  // namespace kolo::socket
