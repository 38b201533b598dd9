// The tags kolo's own algorithms put on their point-to-point messages, and how
// they are partitioned so that several users can share one PointToPoint.
//
// Note [Tag spaces]
// ~~~~~~~~~~~~~~~~~
// A tag is split in two: the low kTagBits bits name the algorithm (kRing, ...
// below, all under kTagsPerSpace), the bits above name a *space*. Space 0 is a
// world's own PointToPoint used as it is (the "ring", "adasum" transports); a
// SubgroupP2P (subgroup_p2p.h) is given a space >= 1 and sends its users' tag t
// as space * kTagsPerSpace + t on the shared verbs. So a message of one group can
// never match a receive of another group, or of the world, even when the same
// pair of ranks is in both and both run at once: receives match on (peer, tag).
// Within one space, each algorithm has its own tag, so two different collectives
// that got out of step fail on a byte count instead of mixing data.
//
// MPI guarantees tags up to 32767 (MPI_TAG_UB), so spaces 1..kMaxPortableSpace
// fit every MPI; verbs with a larger tag range (the socket world's) take larger
// spaces. Whoever creates SubgroupP2Ps over one PointToPoint gives each a space
// of its own (e.g. the cross-node group one, each process set another).
#pragma once

namespace kolo::algorithms::tags {

constexpr int kTagBits = 8;
constexpr int kTagsPerSpace = 1 << kTagBits;
constexpr int kMaxPortableSpace = 32767 / kTagsPerSpace - 1;  // 126: every tag <= 32767

// One per algorithm; each under kTagsPerSpace.
constexpr int kRing = 1;            // ring_allreduce.cc
constexpr int kAdasumData = 2;      // adasum.cc: the vectors
constexpr int kAdasumSums = 3;      // adasum.cc: the dot products
constexpr int kAllgather = 4;       // p2p_ring.cc (allgatherv)
constexpr int kBroadcast = 5;       // p2p_broadcast.cc
constexpr int kAlltoall = 6;        // p2p_alltoall.cc
constexpr int kReducescatter = 7;   // p2p_ring.cc (reducescatter)
constexpr int kDeterministic = 8;   // deterministic_allreduce.cc

// The tag `tag` (< kTagsPerSpace) of space `space` on the shared verbs.
constexpr int in_space(int space, int tag) { return space * kTagsPerSpace + tag; }

}  // namespace kolo::algorithms::tags
