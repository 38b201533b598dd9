// The control plane over MPI: small-blob collectives for negotiation, and the
// doorbell.
//
// Contract (see transport/control_plane.h): one thread (the coordinator) calls it,
// and the collectives come in the same order on every rank. Each collective is an
// MPI non-blocking collective on kolo's control communicator, finished with the
// polite wait (mpi_wait.h), so more ranks than cores still progress.
//
// The doorbell has two halves. Ranks on this node share a NodeDoorbell (futexes in
// the node layer's segment, transports/shm): ringing them is a store and a
// wake-up, and an idle coordinator sleeps in the kernel instead of polling. Ranks on other nodes are
// rung point-to-point on the control communicator, on its own tag
// (kDoorbellTag): ring(c) sends c to each of them; each rank keeps one receive
// for the tag posted at all times, and rung() drains what has arrived and
// remembers the highest cycle seen. Each ring carries the plane's session, so a
// ring left from an earlier plane is not heard (Note [Rings from an earlier
// plane]). Point-to-point and collective traffic never
// match each other in MPI, and the data communicator is a different one, so the
// doorbell cannot steal a message meant for anything else.
//
// When every rank is on this node, bitwise_and (one per negotiation cycle) goes
// through shared memory too (shm::NodeAnd, Note [The AND on one node]); the
// rarer collectives of the slow path stay MPI collectives. Both shared-memory
// halves come from the node layer, which is made through this plane
// (use_node(), after shm::Node::create).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "transport/control_plane.h"
#include "transports/mpi/mpi_comm.h"
#include "transports/shm/doorbell.h"
#include "transports/shm/node.h"
#include "transports/shm/node_and.h"

namespace kolo::mpi {

class MpiControlPlane : public transport::ControlPlane {
 public:
  static constexpr int kDoorbellTag = 1;

  // Posts the doorbell receive. `comms` stays shared until destruction. Until
  // use_node(), every ring and AND goes through MPI.
  static Status create(SharedComms comms, const transport::Topology& topology,
                       std::unique_ptr<MpiControlPlane>* out);
  // Rings the node's ranks through `node`'s doorbell, and, when the whole world
  // is on this node, runs bitwise_and through its AND; both wait with the
  // world's Liveness as it is now (the PeerMonitor). Once, before the
  // coordinator starts, on every rank alike.
  Status use_node(const std::shared_ptr<shm::Node>& node);
  // Cancels the doorbell receive and reaps the doorbell sends (a bounded wait: a
  // send that does not complete within a second is released to MPI and its buffer
  // leaked rather than freed under it).
  ~MpiControlPlane() override;

  const transport::Topology& topology() const override { return topology_; }
  Status allgather(const transport::Bytes& mine, std::vector<transport::Bytes>* all) override;
  Status gather(const transport::Bytes& mine, std::vector<transport::Bytes>* all,
                int root) override;
  Status broadcast(transport::Bytes* blob, int root) override;
  Status bitwise_and(std::vector<uint64_t>* bits) override;
  // Note [Ringing only the late] (transports/shm/node_and.h) where every rank is
  // on this node.
  Status ring_and(uint64_t cycle, std::vector<uint64_t>* bits) override;
  // Through the node's AND (shm::NodeAnd) when the whole world is on this node.
  size_t carry_capacity(size_t words, bool in_line) const override;
  char* carry_slot(size_t words, bool in_line) override;
  bool unanimous() const override;
  const char* carried(int rank) const override;
  Status barrier() override;

  Status ring(uint64_t cycle) override;
  // On an MPI error in the doorbell, logs it and answers true: the coordinator
  // then runs a cycle, whose collectives report the broken world as a Status.
  bool rung(uint64_t cycle) override;
  // On one node: a futex sleep (shm::NodeDoorbell). With peers on other nodes, the
  // sleep is capped at `poll` so their MPI rings are seen.
  void wait_for_ring(uint64_t cycle, std::chrono::microseconds timeout,
                     std::chrono::microseconds poll) override;
  void wake() override;
  Status check_peers() override;

 private:
  // A ring on the wire: the sender's plane's session and the cycle.
  struct Ring {
    uint64_t session = 0;
    uint64_t cycle = 0;
  };
  static_assert(sizeof(Ring) == 2 * sizeof(uint64_t), "a ring is sent as two MPI_UINT64_T");
  // One ring(): the message (the send buffer) and a send to each peer.
  struct Ringing {
    Ring ring;
    std::vector<MPI_Request> sends;
  };

  MpiControlPlane(SharedComms comms, const transport::Topology& topology);
  Status agree_on_session();
  Status post_doorbell_receive();
  bool mpi_rung(uint64_t cycle);
  Status find_node_peers();
  Status drain_doorbell();
  Status reap_ringings();
  Liveness* alive() const { return comms_->liveness.get(); }
  // `timeout`, capped so that an idle coordinator calls check_peers() often
  // enough for its peers to hear from it (Liveness::check_every).
  std::chrono::microseconds capped(std::chrono::microseconds timeout) const;
  void release_ringings();

  SharedComms comms_;
  MPI_Comm comm_;
  transport::Topology topology_;
  uint64_t session_ = 0;  // the same on every rank; drawn by rank 0 at create()
  std::unique_ptr<Ring> doorbell_in_;  // the posted receive's buffer
  MPI_Request doorbell_recv_ = MPI_REQUEST_NULL;
  uint64_t highest_rung_ = 0;
  bool any_rung_ = false;
  std::list<Ringing> ringings_;  // a list: send buffers must not move
  // Ranks on this node are rung through node_ (shared memory); MPI messages go
  // only to the others.
  std::unique_ptr<shm::NodeDoorbell> node_;
  std::unique_ptr<shm::NodeAnd> node_and_;  // only when the whole world is on this node
  bool and_on_node_ = false;  // the last bitwise_and() went through node_and_
  std::vector<bool> on_my_node_;  // by rank of the control communicator
  int remote_peers_ = 0;
};

// Note [Rings from an earlier plane]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A ring can reach a rank after that rank's control plane is gone: two ranks rang
// the same last cycle and only one ring was drained, or the ring was still on the
// wire when the destructor cancelled the receive. MPI keeps it among the
// unexpected messages of the freed communicator's context id, and MPICH gives
// that id to the next communicator duplicated the same way: the next kolo_init's
// control plane. Its doorbell receive then matched the old ring, an old session's
// cycle (hundreds) stood as "rung" for the new session's first cycles, and a rank
// that believed itself rung started those cycles without ringing; ranks on other
// nodes, which hear only MPI rings, slept until a stall timer woke them: in a
// repro of multihost allreduce_api_test.2x2, each allreduce took
// KOLO_STALL_CHECK_TIME_SECONDS (15 s there) until the new cycles passed the old
// number; with the default 60 s, CI's 120 s wait ran out. Draining at shutdown
// cannot be made complete (a rank does not know how many rings are still
// coming), so the rings say which plane sent them: rank 0 draws a 64-bit session
// at create() and broadcasts it; a ring of another session is dropped on arrival.
// Test: MpiControlPlane.ARingLeftFromAnEarlierPlaneIsNotHeardByTheNext.

}  // namespace kolo::mpi
