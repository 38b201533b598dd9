// PointToPoint: the verbs kolo's own algorithms (src/algorithms) are written in.
//
// Contract:
// - Called only by the coordinator thread. Algorithms post isend/irecv and wait on
//   the returned request ids; every request is waited on exactly once.
// - Memory passed to isend/irecv is owned by the caller and must stay valid until
//   the request is waited on.
// - Messages between one pair of ranks with the same tag arrive in the order sent.
// - wait() must not spin without bound (poll briefly, then yield or sleep).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace kolo::transport {

using RequestId = int64_t;

class PointToPoint {
 public:
  virtual ~PointToPoint() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual Status isend(int peer, const void* data, size_t bytes, int tag, RequestId* id) = 0;
  virtual Status irecv(int peer, void* data, size_t bytes, int tag, RequestId* id) = 0;

  // Blocks until the request completes. A receive that got a different number of
  // bytes than posted is an error.
  virtual Status wait(RequestId id) = 0;

  // Non-blocking: *done becomes true once the request completed (it must still be
  // waited on, which then returns at once).
  virtual Status test(RequestId id, bool* done) = 0;
};

}  // namespace kolo::transport
