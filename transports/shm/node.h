// Node: the node layer — one shared memory segment per world per node, holding
// every region the ranks of a node share, made through the world's control
// plane so that any world (MPI, the socket world, loopback in tests) has it.
//
// What lives there (Layout below): per local rank, a part of its own — its
// board line (pid and heartbeat: board.h), its doorbell line (doorbell.h), the
// calibration's counters (core_distance.h), then, as the world asks
// (NodeOptions), the node AND's slots (node_and.h), the shm allreduce's control
// block and slots (allreduce.h) and the shm collectives' control block, headers
// and slots (collectives.h). The engines are views on their regions; each
// region serves one engine (claim()).
//
// Contract:
// - create() is collective over the control plane's world, every rank with the
//   same options; it runs once per world (kolo_init, kolo_process_set_add), on
//   the thread that owns the control plane, before the coordinator starts. The
//   world's topology says which ranks share a node (Topology::node, local_rank,
//   local_size). Its waits are the control plane's collectives, so they are as
//   bounded as the world makes them (a Deadline in the MPI world); an error —
//   a peer gone, /dev/shm full, a segment in the way — fails create() on every
//   rank alike, naming the rank that saw it, and leaves no segment behind.
// - Each local rank zeroes its own part before anyone uses it (which also
//   pre-faults it, so no page fault lands on the hot path).
// - After create() nothing here makes a call to the world: ranks synchronise
//   through counters in the segment (counter.h).
// - Owned through shared_ptr by everything carved from it (engines, the AND,
//   the doorbell, the board); the mapping goes with the last of them. Unmapping
//   is local, so teardown never waits for a peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/control_plane.h"
#include "transports/shm/core_distance.h"
#include "transports/shm/segment.h"

namespace kolo::shm {

// Which regions the segment holds, from the world (the same on every rank).
struct NodeOptions {
  size_t allreduce_slot_bytes = 0;    // the shm allreduce's slots; 0: no such region
  size_t collectives_slot_bytes = 0;  // the shm collectives' slots; 0: none
  bool node_and = false;              // the node AND's slots
};

// Where everything is, in bytes: the header's page, then one part per local
// rank. Offsets in a part are the same for every rank; parts and regions start
// on pages, lines on cache lines. A pure function of the options and the
// node's size, so every local rank computes the same layout.
struct Layout {
  static constexpr size_t kPage = 4096;
  static constexpr size_t kLine = 64;
  // The first page of a part, one cache line each.
  static constexpr size_t kBoard = 0;
  static constexpr size_t kDoorbell = 1 * kLine;
  // Calibration (core_distance.h): one word in local rank 0's part that ranks 0
  // and 1 both write (Note [Timing round trips in batches]); 3 * kLine is free.
  static constexpr size_t kPing = 2 * kLine;
  static constexpr size_t kDecision = 4 * kLine;  // local rank 0's
  size_t node_and = 0, node_and_bytes = 0;  // bytes 0: absent
  size_t allreduce = 0, allreduce_bytes = 0;
  size_t collectives = 0, collectives_bytes = 0;
  size_t first_part = kPage;  // after the header's page
  size_t part_bytes = kPage;
  size_t total_bytes = 0;
};
Layout layout_for(const NodeOptions& options, int local_size);

class Node {
 public:
  enum class Region { kNodeAnd, kAllreduce, kCollectives, kDoorbell, kBoard };
  static constexpr int kRegions = 5;

  static Status create(transport::ControlPlane& control, const NodeOptions& options,
                       std::shared_ptr<Node>* out);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int local_rank() const { return local_rank_; }
  int local_size() const { return static_cast<int>(world_ranks_.size()); }
  // The world rank of each local rank.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  const Layout& layout() const { return layout_; }
  const NodeOptions& options() const { return options_; }
  // The segment's name (unlinked once create() returns; for logs and tests).
  const std::string& name() const { return segment_->name(); }
  // Local rank `local`'s part, `offset` bytes in (Layout).
  char* at(int local, size_t offset) const {
    return base_ + layout_.first_part + static_cast<size_t>(local) * layout_.part_bytes + offset;
  }
  // Whether the node's ranks can read each other's memory with one copy
  // (peer_read.h), probed at create(): the same on every local rank.
  bool single_copy() const { return single_copy_; }
  // The node's one verdict on whether local ranks 0 and 1 run far apart.
  CoreDistance& core_distance() { return core_distance_; }

  // For `engine`, the one user of `region`: an error when the region is not in
  // this segment or already serves another (the same on every rank that makes
  // the same calls).
  Status claim(Region region, const char* engine);

 private:
  Node(const transport::Topology& topology, const NodeOptions& options);
  Status build(transport::ControlPlane& control);
  Status meet(transport::ControlPlane& control, SegmentHeader* header, bool* can_read);
  Status map_segment(transport::ControlPlane& control, const SegmentHeader& header, bool can_read);

  NodeOptions options_;
  Layout layout_;
  int node_ = 0;
  int local_rank_ = 0;
  std::vector<int> world_ranks_;
  std::unique_ptr<Segment> segment_;
  char* base_ = nullptr;
  bool single_copy_ = false;
  CoreDistance core_distance_;
  std::vector<bool> claimed_;
};

}  // namespace kolo::shm
