// kolo's Adasum engine over the PointToPoint verbs, and the "adasum" transport
// that reduces op=adasum buckets with it. The algorithm is explained at the top
// of adasum.cc; its arithmetic and index math live in adasum_math.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/adasum_math.h"
#include "common/status.h"
#include "transport/point_to_point.h"
#include "transport/transport.h"

namespace kolo::algorithms {

// Contract: called by the coordinator thread only, with the same counts, dtype
// and call order on every rank (as every transport call is). Scratch memory is
// allocated on first use, grows to the largest call and is kept.
class AdasumAllreduce {
 public:
  explicit AdasumAllreduce(transport::PointToPoint& p2p);

  // Adasum across ranks, in place, of the tensors laid out back to back in
  // `data`: counts[i] elements of tensor i. Each tensor is combined as a whole
  // vector on its own (its dot products never mix with another tensor's), so a
  // tensor gives the same result fused with others as alone, up to the order in
  // which float64 partial sums are added. dtype must be floating. The world size
  // must be a power of two: otherwise Unsupported, and nothing is sent.
  Status run(void* data, const std::vector<int64_t>& counts, DataType dtype);

 private:
  // One level of phase 1, as this rank sees it (adasum.cc).
  struct Level {
    int level = 1;       // distance to the peer: 1, 2, 4, ...
    int peer = 0;        // rank ^ level
    bool lower = true;   // rank & level == 0
    adasum::Segment keep;  // what this rank keeps of the pair's segment
    adasum::Segment give;  // what it sends (and the peer keeps)
  };
  Status reduce_level(char* data, const Level& level, DataType dtype);
  Status group_sum(int level);

  transport::PointToPoint& p2p_;
  std::vector<char> scratch_;      // the received half of a level's segment
  std::vector<int64_t> offsets_;   // where each tensor begins in `data`
  std::vector<double> sums_;       // per tensor: a.b, |lower|^2, |upper|^2
  std::vector<double> incoming_;   // a peer's sums_
  std::vector<Level> levels_;      // phase 1's levels, replayed backwards by phase 2
};

// The "adasum" transport: AdasumAllreduce behind the Transport seam, for host
// buckets whose reduction op is ADASUM (and only those; see Note [Adasum has an
// engine of its own] in src/transport/registry.cc). It applies the bucket's
// prescale before and postscale after, as Horovod does.
std::unique_ptr<transport::Transport> make_adasum_transport(transport::PointToPoint& p2p);

}  // namespace kolo::algorithms
