#include "algorithms/p2p_cross.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "algorithms/subgroup_p2p.h"
#include "common/check.h"

namespace kolo::algorithms {

P2PCross::P2PCross(std::unique_ptr<transport::PointToPoint> group, RingOptions options)
    : group_(std::move(group)), ring_(*group_, options), collectives_(*group_, options) {}

void P2PCross::tune(const transport::Tuning& tuning) {
  if (tuning.segment_bytes == 0) return;
  ring_.set_segment_bytes(tuning.segment_bytes);
  collectives_.set_segment_bytes(tuning.segment_bytes);
}

Status P2PCross::cross_members(const std::vector<transport::Topology>& all, int rank,
                               std::vector<int>* members) {
  KOLO_CHECK_GE(rank, 0);
  KOLO_CHECK_LT(static_cast<size_t>(rank), all.size());
  const int local = all[rank].local_rank;
  std::vector<std::pair<int, int>> by_node;  // cross rank, world rank
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].local_rank == local) by_node.emplace_back(all[r].cross_rank, static_cast<int>(r));
  }
  std::sort(by_node.begin(), by_node.end());
  members->clear();
  for (size_t i = 0; i < by_node.size(); ++i) {
    if (i > 0 && by_node[i].first == by_node[i - 1].first)
      return invalid_argument("cross group: ranks " + std::to_string(by_node[i - 1].second) + " and " +
                              std::to_string(by_node[i].second) + " both have local rank " +
                              std::to_string(local) + " on node " + std::to_string(by_node[i].first));
    members->push_back(by_node[i].second);
  }
  return Status::OK();
}

Status P2PCross::create(transport::ControlPlane& control, transport::PointToPoint& world, int space,
                        RingOptions options, std::unique_ptr<P2PCross>* out) {
  const transport::Topology& me = control.topology();
  const int32_t mine[2] = {me.local_rank, me.cross_rank};
  std::vector<transport::Bytes> blobs;
  KOLO_RETURN_IF_ERROR(
      control.allgather(transport::Bytes(reinterpret_cast<const char*>(mine), sizeof(mine)), &blobs));
  std::vector<transport::Topology> all(blobs.size());
  for (size_t r = 0; r < blobs.size(); ++r) {
    if (blobs[r].size() != sizeof(mine))
      return internal_error("cross group: rank " + std::to_string(r) + " sent " +
                            std::to_string(blobs[r].size()) + " bytes of topology");
    int32_t theirs[2];
    std::memcpy(theirs, blobs[r].data(), sizeof(theirs));
    all[r].local_rank = theirs[0];
    all[r].cross_rank = theirs[1];
  }
  std::vector<int> members;
  KOLO_RETURN_IF_ERROR_AS_IS(cross_members(all, me.rank, &members));
  std::unique_ptr<SubgroupP2P> group;
  KOLO_RETURN_IF_ERROR_AS_IS(SubgroupP2P::create(world, std::move(members), space, &group));
  *out = std::make_unique<P2PCross>(std::move(group), options);
  return Status::OK();
}

}  // namespace kolo::algorithms
