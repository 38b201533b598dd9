// SubgroupP2P: some of a world's ranks, presented as a PointToPoint of their own
// (ranks 0..m-1), over the world's verbs.
//
// What it is for: the cross-node group of a hierarchical transport (the ranks
// with this rank's local rank, one per node) and a process set's members, where
// the world's verbs are the only way between them (the socket world); kolo's
// algorithms then run on the group unchanged.
//
// Contract:
// - `members` are world ranks, distinct, this rank among them; member i is the
//   group's rank i. Every member builds the group with the same members (in the
//   same order) and the same `space`; nothing is exchanged to build it.
// - Tags: a user's tag t, 0 <= t < tags::kTagsPerSpace, travels as
//   space * kTagsPerSpace + t on the world's verbs (Note [Tag spaces] in tags.h),
//   so the group's messages never match another group's or the world's own. A
//   tag outside that range is an InvalidArgument. space >= 1; the world's verbs
//   must accept the resulting tags (MPI's: spaces up to tags::kMaxPortableSpace).
// - Request ids are the world's; wait() and test() pass straight through.
// - Threads: the world's verbs' contract. A group used by one thread while the
//   world's verbs (or another group) are used by another needs verbs that allow
//   it (the test wraps loopback's in a lock).
// - A group of a group is flattened at create(): its members are mapped to world
//   ranks and it gets the space given (which must differ from the parent's).
// - The world's verbs must outlive the group.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "transport/point_to_point.h"

namespace kolo::algorithms {

class SubgroupP2P : public transport::PointToPoint {
 public:
  // InvalidArgument (naming what is wrong) for members that are not distinct
  // ranks of `world` including its own, or a space below 1 or too large.
  static Status create(transport::PointToPoint& world, std::vector<int> members, int space,
                       std::unique_ptr<SubgroupP2P>* out);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  Status isend(int peer, const void* data, size_t bytes, int tag,
               transport::RequestId* id) override;
  Status irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) override;
  Status wait(transport::RequestId id) override { return world_.wait(id); }
  Status test(transport::RequestId id, bool* done) override { return world_.test(id, done); }

  // The world rank of group rank `r`, and the space.
  int world_rank(int r) const { return members_[r]; }
  int space() const { return space_; }

 private:
  SubgroupP2P(transport::PointToPoint& world, std::vector<int> members, int space, int rank)
      : world_(world), members_(std::move(members)), space_(space), rank_(rank) {}
  Status map(int peer, int tag, int* world_peer, int* world_tag) const;

  transport::PointToPoint& world_;
  std::vector<int> members_;
  int space_;
  int rank_;
};

}  // namespace kolo::algorithms
