#include "algorithms/subgroup_p2p.h"

#include <climits>
#include <set>
#include <string>

#include "algorithms/tags.h"
#include "common/check.h"

namespace kolo::algorithms {

Status SubgroupP2P::create(transport::PointToPoint& world, std::vector<int> members, int space,
                           std::unique_ptr<SubgroupP2P>* out) {
  transport::PointToPoint* verbs = &world;
  if (auto* parent = dynamic_cast<SubgroupP2P*>(&world)) {  // flatten a group of a group
    for (int& m : members) {
      if (m < 0 || m >= parent->size())
        return invalid_argument("subgroup: member " + std::to_string(m) + " is not a rank of a group of " +
                                std::to_string(parent->size()));
      m = parent->world_rank(m);
    }
    if (space == parent->space())
      return invalid_argument("subgroup: space " + std::to_string(space) + " is its parent group's");
    verbs = &parent->world_;
  }
  if (space < 1 || space > INT_MAX / tags::kTagsPerSpace - 1)
    return invalid_argument("subgroup: tag space " + std::to_string(space) + " outside 1.." +
                            std::to_string(INT_MAX / tags::kTagsPerSpace - 1));
  std::set<int> seen;
  int rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    if (m < 0 || m >= verbs->size())
      return invalid_argument("subgroup: member " + std::to_string(m) + " is not a rank of a world of " +
                              std::to_string(verbs->size()));
    if (!seen.insert(m).second)
      return invalid_argument("subgroup: rank " + std::to_string(m) + " is listed twice");
    if (m == verbs->rank()) rank = static_cast<int>(i);
  }
  if (rank < 0)
    return invalid_argument("subgroup: this rank (" + std::to_string(verbs->rank()) +
                            ") is not among the members");
  out->reset(new SubgroupP2P(*verbs, std::move(members), space, rank));
  return Status::OK();
}

Status SubgroupP2P::map(int peer, int tag, int* world_peer, int* world_tag) const {
  if (peer < 0 || peer >= size())
    return invalid_argument("subgroup: peer " + std::to_string(peer) + " is not a rank of a group of " +
                            std::to_string(size()));
  if (tag < 0 || tag >= tags::kTagsPerSpace)
    return invalid_argument("subgroup: tag " + std::to_string(tag) + " outside 0.." +
                            std::to_string(tags::kTagsPerSpace - 1));
  *world_peer = members_[peer];
  *world_tag = tags::in_space(space_, tag);
  return Status::OK();
}

Status SubgroupP2P::isend(int peer, const void* data, size_t bytes, int tag,
                          transport::RequestId* id) {
  int p = 0, t = 0;
  KOLO_RETURN_IF_ERROR_AS_IS(map(peer, tag, &p, &t));
  return world_.isend(p, data, bytes, t, id);
}

Status SubgroupP2P::irecv(int peer, void* data, size_t bytes, int tag, transport::RequestId* id) {
  int p = 0, t = 0;
  KOLO_RETURN_IF_ERROR_AS_IS(map(peer, tag, &p, &t));
  return world_.irecv(p, data, bytes, t, id);
}

}  // namespace kolo::algorithms
