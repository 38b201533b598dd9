// The control plane over the socket world's connections (transport/control_plane.h),
// with the same contracts as the MPI world's (transports/mpi/mpi_control_plane.h):
// one calling thread, collectives in the same order on every rank, waits that
// never spin without bound and end with KOLO_ERR_RANK_FAILED when a peer fails.
//
// A plane is a channel of the engine (engine.h) over `members`, the world ranks
// of its ranks in ascending order (the world: all of them; a process set: its
// members). Each collective call takes the next sequence number, the same on
// every member; its messages are keyed by (sequence, round), so a fast rank's
// messages for a later call wait in the engine's mailbox until asked for.
//
//   gather      every member sends its blob to the root
//   broadcast   a binomial tree from the root (ceil(log2 n) rounds)
//   allgather   gather to member 0, then broadcast of the whole
//   bitwise_and recursive doubling (log2 n rounds; with n not a power of two the
//               extra ranks fold into the first ones before and get the answer after)
//   barrier     bitwise_and of nothing
//
// The doorbell rings every member through the engine (kRing frames); rung() and
// wait_for_ring() are answered from what the progress thread has heard, so an
// idle coordinator sleeps on the engine's condition variable. With NodeServices
// (node_seam.h, given at construction or by use_node() once the node layer has
// been made over this plane), host peers are rung through the node's doorbell,
// the coordinator sleeps on it (Note [One sleep for both doorbells]) and, when
// the whole plane is on this host, the AND runs in shared memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/control_plane.h"
#include "transports/socket/engine.h"
#include "transports/socket/node_seam.h"

namespace kolo::socket {

class SocketControlPlane : public transport::ControlPlane {
 public:
  SocketControlPlane(std::shared_ptr<Engine> engine, uint32_t channel, std::vector<int> members,
                     const transport::Topology& topology, NodeServices node = {});
  // Forgets the channel (a process set's id is never reused).
  ~SocketControlPlane() override;

  // Takes the node's services: the node layer is made through this plane
  // (shm::Node::create is collective over it), so they come after construction.
  // Same thread as the collectives, before the coordinator starts.
  void use_node(NodeServices node);
  // The Liveness of this plane's world: the node services' when given, else the
  // engine's. Outlives what is built over the plane.
  transport::Liveness* liveness() const {
    return node_.liveness ? node_.liveness.get() : static_cast<transport::Liveness*>(engine_.get());
  }

  const transport::Topology& topology() const override { return topology_; }
  Status allgather(const transport::Bytes& mine, std::vector<transport::Bytes>* all) override;
  Status gather(const transport::Bytes& mine, std::vector<transport::Bytes>* all,
                int root) override;
  Status broadcast(transport::Bytes* blob, int root) override;
  Status bitwise_and(std::vector<uint64_t>* bits) override;
  // Note [Ringing only the late] (transports/shm/node_and.h) where every rank is
  // on this host.
  Status ring_and(uint64_t cycle, std::vector<uint64_t>* bits) override;
  size_t carry_capacity(size_t words, bool in_line) const override;
  char* carry_slot(size_t words, bool in_line) override;
  bool unanimous() const override;
  const char* carried(int rank) const override;
  Status barrier() override;

  Status ring(uint64_t cycle) override;
  bool rung(uint64_t cycle) override;
  void wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                     std::chrono::microseconds poll) override;
  void wake() override;
  Status check_peers() override { return liveness()->check(); }

  const std::shared_ptr<Engine>& engine() const { return engine_; }
  uint32_t channel() const { return channel_; }
  const std::vector<int>& members() const { return members_; }

 private:
  uint64_t key(int round) const { return (seq_ << 16) | static_cast<uint64_t>(round); }
  Status send(int member, int round, std::string blob);
  Status recv(int member, int round, std::string* blob);
  Status check_root(const char* what, int root) const;
  Status and_rounds(std::vector<uint64_t>* bits);
  // The whole world is on this host and `bits` fits the node's AND.
  bool and_fits_node(const std::vector<uint64_t>& bits) const;

  std::shared_ptr<Engine> engine_;
  const uint32_t channel_;
  const std::vector<int> members_;
  const transport::Topology topology_;
  NodeServices node_;
  std::vector<int> remote_;  // world ranks rung through the engine
  uint64_t seq_ = 0;         // the collective call under way (the same on every member)
  bool and_on_node_ = false;
};

// Note [One sleep for both doorbells]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With the node's doorbell, an idle coordinator sleeps on its futex, where a
// host peer's ring or a local enqueue wakes it in microseconds. Rings from
// other hosts, and a peer's failure, arrive on the engine's progress thread:
// the plane gives the engine a waker (Engine::set_waker) that wakes the futex,
// so a remote ring is answered as fast as a local one and a killed peer is
// reported at once, without polling. The sleep is still capped at the
// liveness's check_every(), so the node's board is consulted while idle.

}  // namespace kolo::socket
