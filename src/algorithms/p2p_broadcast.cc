// Broadcast over point-to-point verbs: root's buffer to every rank, down a
// binomial tree (small messages) or a pipelined chain of segments (large ones).
//
// Ranks are renumbered relative to the root: v = rank - root (mod n), so the
// root is v = 0 (relative_rank, p2p_schedule.h).
//
// Binomial tree. v's parent is v with its lowest set bit cleared; v sends to
// v + 2^k for every 2^k below that bit, the largest subtree first. n = 8:
//
//        0 ---> 4 ---> 6 ---> 7          round 1: 0->4
//        |      |                        round 2: 0->2, 4->6
//        |      +----> 5                 round 3: 0->1, 2->3, 4->5, 6->7
//        +----> 2 ---> 3
//        +----> 1
//
// Cost: ceil(log2 n) rounds of the whole message of M bytes: ceil(log2 n)(a + M b)
// with a the latency of a message and b its time per byte. The fewest latencies.
//
// Pipelined chain. 0 -> 1 -> 2 -> ... -> n-1; the message moves in segments of S
// bytes (the ring's segment), and v forwards segment k to v+1 as soon as it has
// it, while segment k+1 is already on its way in (receives are posted kAhead
// ahead). Once the pipe is full every rank receives one segment per segment time:
// (n - 2 + M/S)(a + S b), close to M b for M >> n S: each link carries the
// message once, where the tree's root link carries it log2 n times.
//
// Note [Tree or chain]
// ~~~~~~~~~~~~~~~~~~~~
// The chain when bytes * (ceil(log2 n) - 1) > (n - 2) * S, the tree otherwise
// (broadcast_by_chain, p2p_schedule.h). That is where the model above puts the
// crossover once a segment takes longer than a message latency (a << S b): the
// tree costs ceil(log2 n) M b, the chain (n - 2) S b + M b. So the tree for
// every message of one segment or less (there the chain is n-1 whole hops) and
// at 2 ranks (one hop either way), the chain from 1 segment up at 3 ranks, from
// 2 at 4, from 3 at 8. Both give the same bytes, so the cut only moves time. On
// the 2-core build VM, 3 ranks oversubscribe the cores and the two measured
// within noise of each other (bench/p2p_collectives_bench, BM_Broadcast), so the
// cut is the model's, not a measured one.
#include <algorithm>

#include "algorithms/p2p_collectives.h"
#include "algorithms/p2p_requests.h"
#include "algorithms/p2p_schedule.h"
#include "algorithms/ring_schedule.h"
#include "algorithms/tags.h"

namespace kolo::algorithms {
namespace {

constexpr int kAhead = 2;  // receives posted ahead of the one waited for
constexpr int kSends = 8;  // forwards in flight at most

}  // namespace

Status P2PCollectives::broadcast(void* data, int64_t count, DataType dtype, int root) {
  const char* what = "p2p broadcast";
  const int size = p2p_.size();
  if (!is_valid(dtype)) return invalid_argument(std::string(what) + ": invalid dtype " + dtype_name(dtype));
  if (root < 0 || root >= size || count < 0)
    return invalid_argument(std::string(what) + ": root " + std::to_string(root) + " count " +
                            std::to_string(count) + " in a world of " + std::to_string(size));
  if (data == nullptr && count > 0)
    return invalid_argument(std::string(what) + ": null buffer for " + std::to_string(count) +
                            " elements");
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  if (size == 1 || bytes == 0) return Status::OK();
  char* d = static_cast<char*>(data);
  const size_t segment = static_cast<size_t>(segment_elems(1));
  const bool chain = broadcast_ == Broadcast::kChain ||
                     (broadcast_ == Broadcast::kBySize && broadcast_by_chain(bytes, size, segment));
  return chain ? broadcast_chain(d, bytes, root) : broadcast_tree(d, bytes, root);
}

Status P2PCollectives::broadcast_tree(char* data, size_t bytes, int root) {
  const int size = p2p_.size();
  const int v = relative_rank(p2p_.rank(), root, size);
  Requests requests(p2p_, tags::kBroadcast);
  if (v != 0) {
    transport::RequestId id = 0;
    KOLO_RETURN_IF_ERROR(requests.recv(absolute_rank(tree_parent(v), root, size), data, bytes, &id));
    KOLO_RETURN_IF_ERROR(requests.wait(id));
  }
  for (int child : tree_children(v, size)) {
    KOLO_RETURN_IF_ERROR(requests.send(absolute_rank(child, root, size), data, bytes));
  }
  return requests.wait_all();
}

Status P2PCollectives::broadcast_chain(char* data, size_t bytes, int root) {
  const int size = p2p_.size();
  const int v = relative_rank(p2p_.rank(), root, size);
  const int prev = absolute_rank(v - 1 + size, root, size);
  const int next = v + 1 < size ? absolute_rank(v + 1, root, size) : -1;
  const int64_t seg = segment_elems(1);  // bytes
  const Range all{0, static_cast<int64_t>(bytes)};
  const int64_t n = RingSchedule::num_segments(all.count, seg);
  auto at = [&](int64_t k) { return RingSchedule::segment(all, seg, k); };
  Requests requests(p2p_, tags::kBroadcast);
  transport::RequestId recv_id[kAhead + 1] = {}, send_id[kSends] = {};
  int64_t posted = v == 0 ? n : 0;  // the root receives nothing
  for (int64_t k = 0; k < n; ++k) {
    for (; posted < std::min(n, k + kAhead + 1); ++posted) {
      const Range r = at(posted);
      KOLO_RETURN_IF_ERROR(requests.recv(prev, data + r.begin, static_cast<size_t>(r.count),
                                         &recv_id[posted % (kAhead + 1)]));
    }
    if (v != 0) KOLO_RETURN_IF_ERROR(requests.wait(recv_id[k % (kAhead + 1)]));
    if (next < 0) continue;
    if (k >= kSends) KOLO_RETURN_IF_ERROR(requests.wait(send_id[k % kSends]));
    const Range r = at(k);
    KOLO_RETURN_IF_ERROR(
        requests.send(next, data + r.begin, static_cast<size_t>(r.count), &send_id[k % kSends]));
  }
  return requests.wait_all();
}

}  // namespace kolo::algorithms
