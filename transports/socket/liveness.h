// Liveness: whether the ranks a wait depends on are still there.
//
// The same interface as kolo::mpi::Liveness (transports/mpi/mpi_wait.h), which
// is moving to src/transport; until that move lands the socket world declares
// its own copy here, so that it needs no MPI header. When it has landed, this
// file becomes an alias of the shared one.
//
// check() is OK while every peer runs, else KOLO_ERR_RANK_FAILED naming the
// ranks — for good. failed() says whether that happened (teardown skips what
// would wait for a dead rank). check_every() is how often a rank with nothing to
// wait for must still call check() (max(): never; the socket world's heartbeats
// come from its progress thread, so it needs no calls).
#pragma once

#include <chrono>

#include "common/status.h"

namespace kolo::socket {

class Liveness {
 public:
  virtual ~Liveness() = default;
  virtual Status check() = 0;
  virtual bool failed() const = 0;
  virtual std::chrono::milliseconds check_every() const { return std::chrono::milliseconds::max(); }
};

}  // namespace kolo::socket
