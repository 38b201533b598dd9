// Allgather(v), broadcast, alltoall(v) and reducescatter across nodes: a step
// inside each node through the shm engine (ShmCollectives, in place where it can)
// and a step across nodes through the cross engine (transport/cross_engine.h: the
// ranks with this rank's local rank, one per node). Vocabulary: l ranks per node, c nodes,
// rank (m, i) = m * l + i is local rank i of node m; this rank is (n, j); "block
// (m, i)" is what the view gives rank (m, i); every count is in elements.
//
// Note [What each rank moves]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every algorithm gives each local rank a distinct part of the data to carry
// across nodes, so all l ranks of a node drive the network at once, and puts
// only the bytes another node needs on the network, once per receiving node.
//
//   allgather      cross: (n, j) sends its own block to (m, j) of every other node
//                  (an allgatherv in place, each block at its place in the output).
//                  node: for each node m, a shm allgather in place of node m's
//                  blocks; rank j brings block (m, j), which it has. The own node's
//                  runs while the cross step is in flight.
//   broadcast      the count is cut into l shards. node (root's): shm broadcast from
//                  the root. cross: local rank j broadcasts shard j from the root's
//                  node to its peers. node (the others): shm allgather of the shards
//                  in place. So the root's node sends the buffer once per other
//                  node, in l streams.
//   reducescatter  node: for each node m, a shm reducescatter of node m's blocks:
//                  (n, j) gets the node's partial of block (m, j), one after the
//                  other in a stage of c parts. cross: a reducescatter of the
//                  stage: (n, j) gets part n summed over the nodes, its own block.
//   alltoall       node: for each other node m, a shm alltoall of the blocks bound
//                  for node m: (n, j) gathers from every (n, i) the block for (m, j),
//                  in a stage ordered by m, then i. cross: an alltoallv of the
//                  stage: part m to (m, j); what (m, j) sends lands straight in the
//                  output, already in the order of the senders (m, 0..l-1). The own
//                  node's shm alltoall writes straight into the output while the
//                  cross step is in flight. (n, j) learns what its node's ranks send
//                  to (m, j) from the rows every rank publishes in agree().
//
// Per byte of the result, a rank moves it across nodes at most once, while flat
// algorithms over c * l ranks cross the node boundary with some blocks
// several times (a ring allgather carries every foreign block over the link of
// the rank before a node's first rank, l - 1 of them more than needed).
//
// Note [Reducescatter order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each element is combined node by node: the shm engine combines the l values of
// a node (in its own fixed order), then the cross engine's reducescatter combines
// the c node partials (MPI's in its algorithm's order, kolo's ring in ring order). A
// flat reducescatter combines the c * l values in the order of its algorithm
// (MPICH: recursive halving or pairwise exchange, chosen by size). Both
// are the same terms under the same op: integers, MIN, MAX and floats whose sums
// are exact give identical results (the tests use such values); other float sums
// may differ in the last bits, as they do between MPI's own algorithms.
//
// Note [One verdict for every rank]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Ranks of different nodes share no memory, so the shm engine's header check
// cannot see that node 1 thinks the call is a broadcast from rank 2 while node 0
// thinks it is from rank 0 (the cross step would hang or truncate). So every call starts with
// agree(): each rank publishes a record (collective, dtype, root, count, reduce op,
// a hash of the counts, an alltoall balance, its alltoall row) through a shm
// allgather; each node folds its records into one summary (min and max of each
// field, the balance's sum) that every rank of the node computes alike; the
// summaries go through the cross engine's allgatherv. Every rank then
// holds every node's summary and reaches the same verdict from the same numbers,
// so every rank returns the same error, naming the field and two values. Alltoall
// counts are pairwise: sender s adds w(s, d) * send[d], receiver d subtracts
// w(s, d) * recv[s] (w a 64-bit mix of s and d, wrapping arithmetic); a world sum of
// zero means they match. The record's layout is the same for every op, so ranks
// that disagree on the op still run the same agreement. Cost: one small shm round
// and one small cross allgather per call (the routing keeps small calls off it).
#include "transports/hierarchical/hierarchical_collectives.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <utility>

#include "common/check.h"
#include "transport/reduction.h"

namespace kolo::hierarchical {
namespace {

using transport::CollectiveView;

// agree()'s record: compared fields, then the balance, then the alltoall row.
enum Field { kOp = 0, kDtype, kRoot, kCount, kReduceOp, kCountsHash, kCompared, kBalance = kCompared,
             kRow };
const char* const kFieldNames[] = {"collective", "dtype", "root", "count", "reduce op", "counts"};
// A node's summary: min and max of each compared field, the balance, the most
// bytes a rank of the node forwards in an alltoall, the node's ok.
constexpr int kSummary = 2 * kCompared + 3;
constexpr int kBalanceAt = 2 * kCompared, kForwardedAt = 2 * kCompared + 1, kOkAt = kSummary - 1;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t hash_counts(const std::vector<int64_t>& counts) {
  uint64_t h = counts.size();
  for (int64_t c : counts) h = mix(h ^ static_cast<uint64_t>(c));
  return static_cast<int64_t>(h >> 1);  // >= 0, so min/max compare it as is
}

int64_t sum(const std::vector<int64_t>& counts, size_t begin, size_t end) {
  int64_t s = 0;
  for (size_t i = begin; i < end; ++i) s += counts[i];
  return s;
}

Status check_counts(const std::string& what, const char* field,
                    const std::vector<int64_t>& counts, int size) {
  bool ok = counts.size() == static_cast<size_t>(size);
  for (int64_t c : counts) ok = ok && c >= 0;
  if (ok) return Status::OK();
  return invalid_argument(what + ": " + field + " needs one count >= 0 for each of " +
                          std::to_string(size) + " ranks, got " + std::to_string(counts.size()));
}

// Whether `elems` elements of `elem` bytes fit one cross call of at most `most` bytes.
bool fits(int64_t elems, size_t elem, int64_t most) {
  return elems >= 0 && elems <= most / static_cast<int64_t>(elem);
}

Status mismatch(std::string message) { return Status(Code::kMismatch, std::move(message)); }

}  // namespace

// Whether every node holds consecutive ranks: every rank's own answer, gathered.
Status HierarchicalCollectives::create(transport::ControlPlane& control, shm::ShmCollectives& node,
                                       std::shared_ptr<transport::CrossEngine> cross,
                                       std::unique_ptr<HierarchicalCollectives>* out) {
  std::unique_ptr<HierarchicalCollectives> h(new HierarchicalCollectives());
  const transport::Topology& topo = control.topology();
  h->local_rank_ = topo.local_rank;
  h->local_size_ = topo.local_size;
  h->node_index_ = topo.cross_rank;
  h->nodes_ = topo.cross_size;
  const char mine = topo.rank == h->world_rank(h->node_index_, h->local_rank_) ? 1 : 0;
  std::vector<transport::Bytes> all;
  KOLO_RETURN_IF_ERROR_AS_IS(control.allgather(transport::Bytes(1, mine), &all));
  h->consecutive_ = true;
  for (const transport::Bytes& b : all)
    h->consecutive_ = h->consecutive_ && b == transport::Bytes(1, 1);
  h->cross_ = std::move(cross);
  h->node_ = &node;
  *out = std::move(h);
  return Status::OK();
}

Status HierarchicalCollectives::supports(Collective op, const CollectiveView& view) const {
  const std::string what = std::string("hierarchical ") + collective_name(op);
  if (view.device.kind != DeviceKind::kCpu)
    return unsupported(what + ": CPU memory only, not " + device_name(view.device));
  if (!is_valid(view.dtype)) return unsupported(what + ": invalid dtype " + dtype_name(view.dtype));
  if (!consecutive_)
    return unsupported(what + ": the nodes do not hold consecutive ranks (mpiexec -ppn does)");
  const int size = nodes_ * local_size_;
  const size_t elem = dtype_size(view.dtype);
  const int64_t most = cross_->max_call_bytes();
  const std::string too_large =
      what + ": more than " + std::to_string(most) + " bytes in one cross-node call";
  switch (op) {
    case Collective::kBroadcast:
      if (view.root < 0 || view.root >= size || view.count < 0)
        return invalid_argument(what + ": root " + std::to_string(view.root) + " count " +
                                std::to_string(view.count) + " in a world of " +
                                std::to_string(size));
      return Status::OK();
    case Collective::kAllgather:
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts(what, "recv_counts", view.recv_counts, size));
      return fits(sum(view.recv_counts, 0, size), elem, most) ? Status::OK()
                                                              : unsupported(too_large);
    case Collective::kAlltoall:
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts(what, "send_counts", view.send_counts, size));
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts(what, "recv_counts", view.recv_counts, size));
      // This rank's row and column only (see the header).
      return fits(sum(view.send_counts, 0, size), elem, most) &&
                     fits(sum(view.recv_counts, 0, size), elem, most)
                 ? Status::OK()
                 : unsupported(too_large);
    case Collective::kReducescatter:
      if (!is_elementwise(view.reduction.op))
        return unsupported(what + ": sum, min, max or product, not " + op_name(view.reduction.op));
      KOLO_RETURN_IF_ERROR_AS_IS(check_counts(what, "recv_counts", view.recv_counts, size));
      // Counted in elements of the dtype, not bytes (cross_engine.h: max_call_bytes).
      return fits(sum(view.recv_counts, 0, size), 1, most) ? Status::OK()
                                                           : unsupported(too_large);
    default:
      return internal_error(what + ": not a transport collective");
  }
}

Status HierarchicalCollectives::run(Collective op, const CollectiveView& view) {
  KOLO_RETURN_IF_ERROR_AS_IS(supports(op, view));
  KOLO_RETURN_IF_ERROR_AS_IS(agree(op, view));
  switch (op) {
    case Collective::kAllgather: return allgather(view);
    case Collective::kBroadcast: return broadcast(view);
    case Collective::kAlltoall: return alltoall(view);
    case Collective::kReducescatter: {
      const int rank = world_rank(node_index_, local_rank_);
      // The factors around the node and cross steps, as every host transport's.
      return transport::scaled_reducescatter(view, rank, &prescaled_, [&](const CollectiveView& v) {
               return std::make_unique<transport::CompletedWork>(reducescatter(v));
             })->wait();
    }
    default:
      return internal_error(std::string("hierarchical ") + collective_name(op) +
                            ": not a transport collective");
  }
}

// This rank's record (see Note [One verdict for every rank]).
void HierarchicalCollectives::write_record(Collective op, const CollectiveView& view) {
  const int size = nodes_ * local_size_;
  const int me = world_rank(node_index_, local_rank_);
  record_.assign(kRow + static_cast<size_t>(size), 0);
  record_[kOp] = static_cast<int64_t>(op);
  record_[kDtype] = static_cast<int64_t>(view.dtype);
  const bool bcast = op == Collective::kBroadcast, rs = op == Collective::kReducescatter;
  record_[kRoot] = bcast ? view.root : 0;
  record_[kCount] = bcast ? view.count : 0;
  record_[kReduceOp] = rs ? static_cast<int64_t>(view.reduction.op) : 0;
  const bool blocks = op == Collective::kAllgather || rs;
  record_[kCountsHash] = blocks ? hash_counts(view.recv_counts) : 0;
  if (op != Collective::kAlltoall) return;
  uint64_t balance = 0;
  for (int r = 0; r < size; ++r) {
    balance += mix(uint64_t(me) * size + r) * uint64_t(view.send_counts[r]);
    balance -= mix(uint64_t(r) * size + me) * uint64_t(view.recv_counts[r]);
    record_[kRow + r] = view.send_counts[r];
  }
  record_[kBalance] = static_cast<int64_t>(balance);
}

// The node's summary from its ranks' records: the same on every rank of the node.
void HierarchicalCollectives::summarize_node(Collective op, DataType dtype, bool node_ok) {
  const size_t stride = record_.size();
  summary_.assign(kSummary, 0);
  summary_[kOkAt] = node_ok ? 1 : 0;
  for (int f = 0; f < kCompared; ++f) {
    summary_[2 * f] = INT64_MAX;
    summary_[2 * f + 1] = INT64_MIN;
  }
  uint64_t balance = 0;
  for (int i = 0; node_ok && i < local_size_; ++i) {
    const int64_t* rec = &records_[stride * i];
    for (int f = 0; f < kCompared; ++f) {
      summary_[2 * f] = std::min(summary_[2 * f], rec[f]);
      summary_[2 * f + 1] = std::max(summary_[2 * f + 1], rec[f]);
    }
    balance += static_cast<uint64_t>(rec[kBalance]);
  }
  summary_[kBalanceAt] = static_cast<int64_t>(balance);
  if (node_ok && op == Collective::kAlltoall) summary_[kForwardedAt] = most_forwarded(dtype_size(dtype));
}

// See Note [One verdict for every rank].
Status HierarchicalCollectives::agree(Collective op, const CollectiveView& view) {
  write_record(op, view);
  records_.resize(record_.size() * local_size_);
  CollectiveView gather;
  gather.input = record_.data();
  gather.output = records_.data();
  gather.dtype = DataType::kInt64;
  gather.recv_counts.assign(local_size_, static_cast<int64_t>(record_.size()));
  const Status node = node_->run(Collective::kAllgather, gather);
  summarize_node(op, view.dtype, node.ok());
  summaries_.resize(static_cast<size_t>(kSummary) * nodes_);
  recv_counts_.assign(nodes_, kSummary);
  recv_displs_.clear();
  for (int m = 0; m < nodes_; ++m) recv_displs_.push_back(int64_t{kSummary} * m);
  KOLO_RETURN_IF_ERROR_AS_IS(cross_->allgatherv(summary_.data(), summaries_.data(), recv_counts_,
                                                recv_displs_, DataType::kInt64)
                                 ->wait());
  KOLO_RETURN_IF_ERROR_AS_IS(node);
  return verdict();
}

// The same answer on every rank: it reads only the gathered summaries.
Status HierarchicalCollectives::verdict() const {
  uint64_t total = 0;
  int64_t forwarded = 0;
  for (int m = 0; m < nodes_; ++m) {
    const int64_t* s = &summaries_[static_cast<size_t>(kSummary) * m];
    if (s[kOkAt] == 0)
      return transport_error("hierarchical: the shm engine of node " + std::to_string(m) +
                             " failed the call (see that node's error)");
    total += static_cast<uint64_t>(s[kBalanceAt]);
    forwarded = std::max(forwarded, s[kForwardedAt]);
  }
  for (int f = 0; f < kCompared; ++f) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int m = 0; m < nodes_; ++m) {
      lo = std::min(lo, summaries_[static_cast<size_t>(kSummary) * m + 2 * f]);
      hi = std::max(hi, summaries_[static_cast<size_t>(kSummary) * m + 2 * f + 1]);
    }
    if (lo == hi) continue;
    std::string values = std::to_string(lo) + " and " + std::to_string(hi);
    if (f == kOp)
      values = std::string(collective_name(static_cast<Collective>(lo))) + " and " +
               collective_name(static_cast<Collective>(hi));
    if (f == kDtype)
      values = std::string(dtype_name(static_cast<DataType>(lo))) + " and " +
               dtype_name(static_cast<DataType>(hi));
    const std::string what = std::string("hierarchical: the ranks' calls differ in the ") + kFieldNames[f];
    return mismatch(f == kCountsHash ? what : what + " (" + values + ")");
  }
  if (total != 0)
    return mismatch("hierarchical alltoall: some rank's send counts differ from its "
                    "destinations' receive counts");
  if (forwarded > cross_->max_call_bytes())
    return unsupported("hierarchical alltoall: a rank would forward " + std::to_string(forwarded) +
                       " bytes across nodes, more than one cross-node call takes (" +
                       std::to_string(cross_->max_call_bytes()) + ")");
  return Status::OK();
}

void HierarchicalCollectives::prefix(const std::vector<int64_t>& counts,
                                     std::vector<int64_t>* displs) {
  displs->assign(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) (*displs)[r + 1] = (*displs)[r] + counts[r];
}

void HierarchicalCollectives::node_counts(const std::vector<int64_t>& counts, int m,
                                          std::vector<int64_t>* out) const {
  out->assign(counts.begin() + world_rank(m, 0), counts.begin() + world_rank(m + 1, 0));
}

// See Note [What each rank moves].
Status HierarchicalCollectives::allgather(const CollectiveView& view) {
  const size_t elem = dtype_size(view.dtype);
  const std::vector<int64_t>& counts = view.recv_counts;
  prefix(counts, &displs_);
  char* out = static_cast<char*>(view.output);
  auto at = [&](int rank) { return out + displs_[rank] * elem; };
  const int me = world_rank(node_index_, local_rank_);
  if (view.input != at(me) && counts[me] > 0)
    std::memmove(at(me), view.input, static_cast<size_t>(counts[me]) * elem);
  // Node m's blocks, in place: this rank brings block (m, j).
  auto node_step = [&](int m) {
    if (local_size_ == 1) return Status::OK();
    CollectiveView v;
    v.dtype = view.dtype;
    v.input = at(world_rank(m, local_rank_));
    v.output = at(world_rank(m, 0));
    node_counts(counts, m, &v.recv_counts);
    return node_->run(Collective::kAllgather, v);
  };
  recv_counts_.resize(nodes_);
  recv_displs_.resize(nodes_);
  for (int m = 0; m < nodes_; ++m) {
    const int r = world_rank(m, local_rank_);
    recv_counts_[m] = counts[r];
    recv_displs_[m] = displs_[r];
  }
  std::unique_ptr<transport::Work> cross =
      cross_->allgatherv(at(me), out, recv_counts_, recv_displs_, view.dtype);
  const Status own = node_step(node_index_);  // while the cross step is in flight
  KOLO_RETURN_IF_ERROR_AS_IS(cross->wait());
  KOLO_RETURN_IF_ERROR_AS_IS(own);
  for (int m = 0; m < nodes_; ++m) {
    if (m != node_index_) KOLO_RETURN_IF_ERROR_AS_IS(node_step(m));
  }
  return Status::OK();
}

Status HierarchicalCollectives::broadcast(const CollectiveView& view) {
  const size_t elem = dtype_size(view.dtype);
  const int l = local_size_, root_node = view.root / l, root_local = view.root % l;
  char* out = static_cast<char*>(view.output);
  auto start = [&](int s) { return view.count * s / l; };  // of shard s
  if (node_index_ == root_node && l == 1) {
    if (view.input != out && view.count > 0)
      std::memmove(out, view.input, static_cast<size_t>(view.count) * elem);
  } else if (node_index_ == root_node) {
    CollectiveView v;
    v.dtype = view.dtype;
    v.input = local_rank_ == root_local ? view.input : out;
    v.output = out;
    v.count = view.count;
    v.root = root_local;
    KOLO_RETURN_IF_ERROR_AS_IS(node_->run(Collective::kBroadcast, v));
  }
  char* shard = out + static_cast<size_t>(start(local_rank_)) * elem;
  KOLO_RETURN_IF_ERROR_AS_IS(
      cross_->broadcast(shard, start(local_rank_ + 1) - start(local_rank_), view.dtype, root_node)
          ->wait());
  if (node_index_ == root_node || l == 1) return Status::OK();
  CollectiveView v;  // the shards, in place
  v.dtype = view.dtype;
  v.input = shard;
  v.output = out;
  for (int s = 0; s < l; ++s) v.recv_counts.push_back(start(s + 1) - start(s));
  return node_->run(Collective::kAllgather, v);
}

// `view` without factors (run() applies them around it).
Status HierarchicalCollectives::reducescatter(const CollectiveView& view) {
  const size_t elem = dtype_size(view.dtype);
  const std::vector<int64_t>& counts = view.recv_counts;
  prefix(counts, &displs_);
  // The cross step: part m of the stage to node m.
  const void* input = view.input;  // one rank per node: the input is already in cross order
  recv_counts_.clear();
  for (int m = 0; m < nodes_; ++m) recv_counts_.push_back(counts[world_rank(m, local_rank_)]);
  if (local_size_ > 1) {
    const int64_t total = sum(recv_counts_, 0, recv_counts_.size());
    if (stage_.size() < static_cast<size_t>(total) * elem) stage_.resize(total * elem);
    int64_t offset = 0;
    for (int m = 0; m < nodes_; ++m) {
      CollectiveView v;
      v.dtype = view.dtype;
      v.reduction.op = view.reduction.op;
      v.input = static_cast<const char*>(view.input) + displs_[world_rank(m, 0)] * elem;
      v.output = stage_.data() + offset * elem;
      node_counts(counts, m, &v.recv_counts);
      KOLO_RETURN_IF_ERROR_AS_IS(node_->run(Collective::kReducescatter, v));
      offset += recv_counts_[m];
    }
    input = stage_.data();
  }
  return cross_->reducescatter(input, view.output, recv_counts_, view.dtype, view.reduction.op)
      ->wait();
}

// Bytes (n, j') would forward across nodes in an alltoall, the most over the
// node's ranks j', from the rows agree() gathered (the same on every rank of n).
int64_t HierarchicalCollectives::most_forwarded(size_t elem) const {
  const size_t stride = kRow + static_cast<size_t>(nodes_) * local_size_;
  int64_t most = 0;
  for (int peer = 0; peer < local_size_; ++peer) {
    int64_t bytes = 0;
    for (int m = 0; m < nodes_; ++m) {
      for (int i = 0; m != node_index_ && i < local_size_; ++i)
        bytes += records_[stride * i + kRow + world_rank(m, peer)] * static_cast<int64_t>(elem);
    }
    most = std::max(most, bytes);
  }
  return most;
}

Status HierarchicalCollectives::alltoall(const CollectiveView& view) {
  const size_t elem = dtype_size(view.dtype);
  const int l = local_size_, j = local_rank_, n = node_index_;
  const size_t stride = kRow + static_cast<size_t>(nodes_) * l;
  auto row = [&](int i, int dest) { return records_[stride * i + kRow + dest]; };
  prefix(view.send_counts, &displs_);
  prefix(view.recv_counts, &rdispls_);
  const char* in = static_cast<const char*>(view.input);
  char* out = static_cast<char*>(view.output);
  const size_t in_bytes = displs_.back() * elem, out_bytes = rdispls_.back() * elem;
  if (in_bytes > 0 && out_bytes > 0 && in < out + out_bytes && out < in + in_bytes) {
    input_copy_.assign(in, in + in_bytes);  // the node steps write out before reading all of in
    in = input_copy_.data();
  }
  int64_t staged = 0;  // elements
  for (int m = 0; m < nodes_; ++m)
    for (int i = 0; m != n && l > 1 && i < l; ++i) staged += row(i, world_rank(m, j));
  if (stage_.size() < static_cast<size_t>(staged) * elem) stage_.resize(staged * elem);
  auto node_view = [&](int m, char* output, CollectiveView* v) {
    v->dtype = view.dtype;
    v->input = in + displs_[world_rank(m, 0)] * elem;
    v->output = output;
    node_counts(view.send_counts, m, &v->send_counts);
    v->recv_counts.clear();
    for (int i = 0; i < l; ++i)
      v->recv_counts.push_back(m == n ? view.recv_counts[world_rank(n, i)] : row(i, world_rank(m, j)));
  };
  send_counts_.assign(nodes_, 0);
  send_displs_.assign(nodes_, 0);
  recv_counts_.assign(nodes_, 0);
  recv_displs_.assign(nodes_, 0);
  int64_t offset = 0;
  for (int m = 0; m < nodes_; ++m) {
    recv_displs_[m] = rdispls_[world_rank(m, 0)];
    if (m == n) continue;
    recv_counts_[m] = rdispls_[world_rank(m + 1, 0)] - rdispls_[world_rank(m, 0)];
    if (l == 1) {  // a node of one: the input's block for node m goes as it is
      send_counts_[m] = view.send_counts[m];
      send_displs_[m] = displs_[m];
      continue;
    }
    CollectiveView v;
    node_view(m, stage_.data() + offset * elem, &v);
    KOLO_RETURN_IF_ERROR_AS_IS(node_->run(Collective::kAlltoall, v));
    const int64_t part = sum(v.recv_counts, 0, l);
    send_counts_[m] = part;
    send_displs_[m] = offset;
    offset += part;
  }
  std::unique_ptr<transport::Work> cross =
      cross_->alltoallv(l == 1 ? in : stage_.data(), send_counts_, send_displs_, out, recv_counts_,
                        recv_displs_, view.dtype);
  CollectiveView own;  // while the cross step is in flight: straight into the output
  node_view(n, out + rdispls_[world_rank(n, 0)] * elem, &own);
  Status s = node_->run(Collective::kAlltoall, own);
  KOLO_RETURN_IF_ERROR_AS_IS(cross->wait());
  return s;
}

}  // namespace kolo::hierarchical
