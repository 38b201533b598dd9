// The seam where the node layer (transports/shm) plugs into the socket world's
// control plane: for ranks that share a host, the negotiation's AND and the
// doorbell can go through shared memory instead of sockets, as the MPI world's
// control plane does with its NodeAnd and NodeDoorbell today.
//
// The socket world builds them over the node layer (socket_node.h: adapters of
// shm::NodeAnd and shm::NodeDoorbell, and the liveness that adds the node's
// board to the engine's); SocketControlPlane takes them when given and behaves
// exactly as without them otherwise (tests give fakes: node_seam_test.cc). Both
// are used by the plane's one calling thread (the coordinator), except
// NodeDoorbell::wake (any thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/liveness.h"

namespace kolo::socket {

class NodeDoorbell;

// The bitwise AND over the ranks of this host, with the bytes that may ride
// with it (Note [Data rides with the AND] in core/negotiator.h). Collective
// over the host's ranks, in the same order on each.
class NodeAnd {
 public:
  virtual ~NodeAnd() = default;
  virtual size_t max_words() const = 0;
  // What may ride with a run() of `words` words (at most max_words()), and
  // where this rank writes it (ControlPlane::carry_capacity and carry_slot).
  virtual size_t carry_bytes(size_t words, bool in_line) const = 0;
  virtual Status run(std::vector<uint64_t>* bits) = 0;
  // run(), ringing `late` for `cycle` (unless a peer has) only if some peer has
  // not posted its vector shortly after this rank did (Note [Ringing only the
  // late] in transports/shm/node_and.h); by default it rings first.
  virtual Status run_ringing_late(std::vector<uint64_t>* bits, NodeDoorbell* late, uint64_t cycle);
  virtual char* carry_slot(size_t words, bool in_line) = 0;
  virtual bool unanimous() const = 0;
  // What local rank `local_rank` carried in the last run().
  virtual const char* carried(int local_rank) const = 0;
};

// The doorbell among the ranks of this host (a futex in shared memory).
class NodeDoorbell {
 public:
  virtual ~NodeDoorbell() = default;
  virtual void ring(uint64_t cycle) = 0;
  virtual bool rung(uint64_t cycle) const = 0;
  // Sleeps until a host peer rings for `cycle` or later, wake(), `also_ready()`
  // (polled at least every `timeout`), or `timeout`.
  virtual void wait(uint64_t cycle, std::chrono::microseconds timeout,
                    const std::function<bool()>& also_ready) = 0;
  virtual void wake() = 0;
};

inline Status NodeAnd::run_ringing_late(std::vector<uint64_t>* bits, NodeDoorbell* late,
                                        uint64_t cycle) {
  if (!late->rung(cycle)) late->ring(cycle);
  return run(bits);
}

// What a plane is given for its host peers. `on_host[r]` (by the plane's rank)
// says which ranks the doorbell reaches; the AND is used only when every rank of
// the plane is on this host. `liveness`, when set, is the plane's check_peers()
// and the Liveness of everything built on the plane (the engine's verdicts plus
// the node's board); declared first, so the AND that consults it goes before
// it. Any may be null.
struct NodeServices {
  std::unique_ptr<transport::Liveness> liveness;
  std::unique_ptr<NodeAnd> node_and;
  std::unique_ptr<NodeDoorbell> doorbell;
  std::vector<bool> on_host;
};

}  // namespace kolo::socket
