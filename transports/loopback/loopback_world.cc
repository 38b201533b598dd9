// The loopback world: ControlPlane, PointToPoint and the "loopback" transport for
// ranks that are threads of one process, all over one shared Hub.
#include "transports/loopback/loopback_world.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "algorithms/adasum.h"
#include "algorithms/ring_allreduce.h"
#include "common/check.h"
#include "reduce/reduce.h"
#include "transport/reduction.h"
#include "transport/registry.h"
#include "transports/loopback/loopback_collectives.h"
#include "transports/loopback/loopback_hub.h"

namespace kolo::loopback {
namespace {

using transport::Bucket;
using transport::Transport;
using transport::RequestId;
using transport::Topology;

Status check_root(int root, int size) {
  if (root < 0 || root >= size) {
    return invalid_argument("loopback: root " + std::to_string(root) +
                            " is not a rank of a world of " + std::to_string(size));
  }
  return Status::OK();
}

// --- ControlPlane -------------------------------------------------------------

// Rank `topology.rank`'s control plane, used by that rank's thread only. Every
// collective is one rendezvous on hub.control (two ranks in different collectives
// get an internal error); ring/rung go through the hub's doorbell.
class LoopbackControlPlane : public transport::ControlPlane {
 public:
  LoopbackControlPlane(std::shared_ptr<Hub> hub, Topology topology)
      : hub_(std::move(hub)), topology_(topology) {}

  const Topology& topology() const override { return topology_; }

  Status allgather(const Bytes& mine, std::vector<Bytes>* all) override {
    return hub_->control.exchange(topology_.rank, "allgather", mine, all);
  }

  Status gather(const Bytes& mine, std::vector<Bytes>* all, int root) override {
    KOLO_RETURN_IF_ERROR(check_root(root, topology_.size));
    std::vector<Bytes> everything;
    KOLO_RETURN_IF_ERROR(hub_->control.exchange(topology_.rank, "gather", mine, &everything));
    all->clear();
    if (topology_.rank == root) *all = std::move(everything);
    return Status::OK();
  }

  Status broadcast(Bytes* blob, int root) override {
    KOLO_RETURN_IF_ERROR(check_root(root, topology_.size));
    std::vector<Bytes> all;
    Bytes mine = topology_.rank == root ? *blob : Bytes();
    KOLO_RETURN_IF_ERROR(
        hub_->control.exchange(topology_.rank, "broadcast", std::move(mine), &all));
    *blob = std::move(all[root]);
    return Status::OK();
  }

  Status bitwise_and(std::vector<uint64_t>* bits) override {
    Bytes mine(reinterpret_cast<const char*>(bits->data()), bits->size() * sizeof(uint64_t));
    std::vector<Bytes> all;
    KOLO_RETURN_IF_ERROR(hub_->control.exchange(topology_.rank, "bitwise_and", mine, &all));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != mine.size()) {
        return internal_error("loopback: bitwise_and of " + std::to_string(bits->size()) +
                              " words here, " + std::to_string(all[r].size() / sizeof(uint64_t)) +
                              " on rank " + std::to_string(r));
      }
      for (size_t i = 0; i < bits->size(); ++i) {
        uint64_t word;
        std::memcpy(&word, all[r].data() + i * sizeof(uint64_t), sizeof(word));
        (*bits)[i] &= word;
      }
    }
    return Status::OK();
  }

  Status barrier() override {
    return hub_->control.exchange(topology_.rank, "barrier", Bytes(), nullptr);
  }

  Status ring(uint64_t cycle) override {
    hub_->doorbell.ring(topology_.rank, cycle);
    return Status::OK();
  }

  bool rung(uint64_t cycle) override { return hub_->doorbell.rung(topology_.rank, cycle); }

 private:
  std::shared_ptr<Hub> hub_;
  Topology topology_;
};

// --- PointToPoint -------------------------------------------------------------

// One rank's verbs over the hub's mailboxes, used by that rank's thread only. A
// send copies its bytes, so it is complete when isend returns; a receive is done
// once the matching message has been copied into its buffer.
class LoopbackPointToPoint : public transport::PointToPoint {
 public:
  LoopbackPointToPoint(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->size; }

  Status isend(int peer, const void* data, size_t bytes, int tag, RequestId* id) override {
    KOLO_RETURN_IF_ERROR(check_peer(peer));
    hub_->mailboxes.send(rank_, peer, tag, data, bytes);
    auto done = std::make_shared<RecvState>();
    done->done = true;  // the bytes are copied: a send is complete at once
    *id = track(std::move(done));
    return Status::OK();
  }

  Status irecv(int peer, void* data, size_t bytes, int tag, RequestId* id) override {
    KOLO_RETURN_IF_ERROR(check_peer(peer));
    auto recv = std::make_shared<RecvState>();
    recv->data = data;
    recv->bytes = bytes;
    *id = track(recv);
    hub_->mailboxes.post_recv(peer, rank_, tag, std::move(recv));
    return Status::OK();
  }

  Status wait(RequestId id) override {
    auto it = requests_.find(id);
    if (it == requests_.end())
      return internal_error("loopback: wait on unknown request " + std::to_string(id));
    std::shared_ptr<RecvState> request = std::move(it->second);
    requests_.erase(it);
    return hub_->mailboxes.wait(rank_, *request);
  }

  Status test(RequestId id, bool* done) override {
    auto it = requests_.find(id);
    if (it == requests_.end())
      return internal_error("loopback: test of unknown request " + std::to_string(id));
    *done = hub_->mailboxes.test(*it->second);
    return Status::OK();
  }

 private:
  Status check_peer(int peer) const {
    if (peer < 0 || peer >= hub_->size) {
      return invalid_argument("loopback: peer " + std::to_string(peer) + " is not a rank");
    }
    return Status::OK();
  }

  RequestId track(std::shared_ptr<RecvState> request) {
    const RequestId id = next_id_++;
    requests_.emplace(id, std::move(request));
    return id;
  }

  std::shared_ptr<Hub> hub_;
  int rank_;
  RequestId next_id_ = 1;
  std::unordered_map<RequestId, std::shared_ptr<RecvState>> requests_;
};

// --- the "loopback" transport -------------------------------------------------

// What each rank publishes for one allreduce.
struct Contribution {
  const void* input;
  int64_t count;
  DataType dtype;
  ReduceOp op;
};

// The reference allreduce: every rank reads every rank's input and reduces them in
// rank order into its own output, so all ranks compute bit-identical results. The
// other collectives work the same way (loopback_collectives.h).
class LoopbackTransport : public transport::Transport {
 public:
  LoopbackTransport(std::shared_ptr<Hub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

  const char* name() const override { return "loopback"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.host = true;
    return c;
  }

  Status supports(const Bucket& bucket) const override {
    if (bucket.device.kind != DeviceKind::kCpu) {
      return unsupported("loopback: CPU memory only, the bucket is on " +
                         device_name(bucket.device));
    }
    return Status::OK();
  }

  std::unique_ptr<transport::Work> allreduce(const Bucket& bucket) override {
    return transport::reduce_contiguous(bucket, [&](const void* in, void* out, int64_t count) {
      const Contribution mine{in, count, bucket.dtype, bucket.reduction.op};
      return std::make_unique<transport::CompletedWork>(run(mine, out));
    });
  }

  Status supports_collective(Collective op,
                             const transport::CollectiveView& view) const override {
    return check_collective(op, view);
  }

  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& view) override {
    auto start = [&](const transport::CollectiveView& v) {
      return std::make_unique<transport::CompletedWork>(
          run_collective(hub_->transport, rank_, hub_->size, op, v, &scratch_));
    };
    if (op != Collective::kReducescatter) return start(view);
    return transport::scaled_reducescatter(view, rank_, &prescaled_, start);
  }

 private:
  // Reduces `mine` (this rank's contribution) into `output`.
  Status run(const Contribution& mine, void* output);
  Status publish(const Contribution& mine, std::vector<Contribution>* all);

  std::shared_ptr<Hub> hub_;
  int rank_;
  std::vector<char> scratch_;    // in place: the result waits here (grow-only)
  std::vector<char> prescaled_;  // a prescaled reducescatter input (grow-only)
};

Status LoopbackTransport::publish(const Contribution& b, std::vector<Contribution>* all) {
  const Contribution& mine = b;
  std::vector<Bytes> blobs;
  KOLO_RETURN_IF_ERROR(hub_->transport.exchange(
      rank_, "allreduce", Bytes(reinterpret_cast<const char*>(&mine), sizeof(mine)), &blobs));
  all->resize(blobs.size());
  for (size_t r = 0; r < blobs.size(); ++r) {
    KOLO_CHECK_EQ(blobs[r].size(), sizeof(Contribution));
    std::memcpy(&(*all)[r], blobs[r].data(), sizeof(Contribution));
    const Contribution& c = (*all)[r];
    if (c.count != b.count || c.dtype != b.dtype || c.op != b.op) {
      return internal_error("loopback: allreduce of " + std::to_string(b.count) + " " +
                            dtype_name(b.dtype) + " " + op_name(b.op) + " here, " +
                            std::to_string(c.count) + " " + dtype_name(c.dtype) + " " +
                            op_name(c.op) + " on rank " + std::to_string(r));
    }
  }
  return Status::OK();
}

Status LoopbackTransport::run(const Contribution& b, void* output) {
  const size_t bytes = static_cast<size_t>(b.count) * dtype_size(b.dtype);
  if (b.count == 0) return Status::OK();
  if (hub_->size == 1) {
    if (b.input != output) std::memcpy(output, b.input, bytes);
    return Status::OK();
  }
  std::vector<Contribution> all;
  KOLO_RETURN_IF_ERROR(publish(b, &all));
  // If our output is some rank's input (in place), others still read it: reduce
  // into scratch and copy after everyone is done reading.
  char* out = static_cast<char*>(output);
  bool overlaps = false;
  for (const Contribution& c : all) {
    const char* in = static_cast<const char*>(c.input);
    overlaps = overlaps || (out < in + bytes && in < out + bytes);
  }
  if (overlaps && scratch_.size() < bytes) scratch_.resize(bytes);
  char* result = overlaps ? scratch_.data() : out;
  std::memcpy(result, all[0].input, bytes);
  for (size_t r = 1; r < all.size(); ++r) {
    reduce::reduce(result, result, all[r].input, b.count, b.dtype, b.op);
  }
  // Nobody returns (and lets its input go) before everyone has read it.
  KOLO_RETURN_IF_ERROR(hub_->transport.exchange(rank_, "allreduce done", Bytes(), nullptr));
  if (overlaps) std::memcpy(out, result, bytes);
  return Status::OK();
}

Topology make_topology(int rank, int size, int node_size) {
  Topology t;
  t.rank = rank;
  t.size = size;
  if (node_size <= 0 || node_size >= size) {  // one node
    t.local_rank = rank;
    t.local_size = size;
    return t;
  }
  // Pretend nodes of node_size consecutive ranks; the last may be smaller.
  const int node = rank / node_size;
  t.local_rank = rank % node_size;
  t.local_size = std::min(node_size, size - node * node_size);
  t.cross_rank = node;
  t.node = node;
  t.cross_size = (size + node_size - 1) / node_size;
  return t;
}

// What only a loopback world can build: its reference allreduce ("loopback"); the
// registry adds the ring and the Adasum engine over its point-to-point verbs. No
// cross-node or device engine (make_world's DeviceMaker says so), and no shm: the node layer (transports/shm) can be made over a
// loopback world's control plane (tests/unit/shm does, ranks as threads), but
// create_worlds() builds its worlds one after the other on one thread, where a
// collective Node::create cannot run; the registry then offers neither shm,
// hierarchical nor nccl.
Status none(const char* what) {
  return unsupported(std::string("the loopback world has no ") + what + " engine");
}

class LoopbackFactory : public transport::TransportFactory {
 public:
  LoopbackFactory(std::shared_ptr<Hub> hub, int rank, bool equal_nodes)
      : hub_(std::move(hub)), rank_(rank), equal_nodes_(equal_nodes) {}
  Status native(std::unique_ptr<Transport>* out) override {
    *out = std::make_unique<LoopbackTransport>(hub_, rank_);
    return Status::OK();
  }
  Status node(size_t, std::unique_ptr<shm::ShmTransport>*) override { return none("shared memory"); }
  Status equal_nodes(bool* out) override {
    *out = equal_nodes_;
    return Status::OK();
  }
  Status cross(std::shared_ptr<transport::CrossEngine>*) override { return none("cross-node"); }

 private:
  std::shared_ptr<Hub> hub_;
  int rank_;
  bool equal_nodes_;
};

}  // namespace

namespace {

// Rank `rank` of the world over `hub`; `node_of` says which pretend node each of
// its ranks is on (for the topology).
transport::World make_world(std::shared_ptr<Hub> hub, const Topology& topology, bool equal_nodes) {
  transport::World w;
  w.control = std::make_unique<LoopbackControlPlane>(hub, topology);
  w.p2p = std::make_unique<LoopbackPointToPoint>(hub, topology.rank);
  LoopbackFactory factory(hub, topology.rank, equal_nodes);
  // No device transport: its bootstrap is collective, and these worlds are built
  // one after the other on one thread.
  auto no_device = [](size_t, std::shared_ptr<transport::CrossEngine>,
                      std::unique_ptr<Transport>*, transport::DeviceSupport** support) {
    *support = nullptr;
    return none("device");
  };
  Status s = transport::build_transports(factory, topology, transport::BuildOptions{}, &w, no_device);
  KOLO_CHECK(s.ok());  // the loopback factory fails nothing but Unsupported
  return w;
}

// A process set's topology: the members numbered in `ranks` order, its local
// ranks the members on this rank's pretend node, its cross ranks the members with
// this local rank (one per node that has one).
Topology subset_topology(int me, const std::vector<int>& ranks, int node_size, bool* equal_nodes) {
  auto node = [&](int r) { return node_size > 0 ? r / node_size : 0; };
  std::map<int, int> per_node;  // node -> members there
  Topology t;
  t.size = static_cast<int>(ranks.size());
  for (int i = 0; i < t.size; ++i) {
    if (ranks[i] == me) {
      t.rank = i;
      t.local_rank = per_node[node(me)];
    }
    ++per_node[node(ranks[i])];
  }
  t.local_size = per_node[node(me)];
  t.cross_size = 0;
  t.node = 0;
  *equal_nodes = true;
  for (const auto& [n, count] : per_node) {
    *equal_nodes = *equal_nodes && count == t.local_size;
    if (n == node(me)) t.cross_rank = t.cross_size;
    if (n < node(me)) ++t.node;  // the set's nodes, in the order of the world's
    if (count > t.local_rank) ++t.cross_size;
  }
  if (t.local_size == t.size) t.cross_size = 1;
  return t;
}

}  // namespace

std::vector<transport::World> create_worlds(int size, int node_size) {
  KOLO_CHECK_GE(size, 1);
  auto hub = std::make_shared<Hub>(size);
  std::vector<transport::World> worlds(size);
  for (int rank = 0; rank < size; ++rank) {
    const bool equal_nodes = node_size <= 0 || size % node_size == 0;
    worlds[rank] = make_world(hub, make_topology(rank, size, node_size), equal_nodes);
    worlds[rank].make_subset = [hub, rank, node_size](int32_t id, const std::vector<int>& ranks,
                                                     transport::World* out) {
      bool equal_nodes = true;
      const Topology t = subset_topology(rank, ranks, node_size, &equal_nodes);
      *out = make_world(hub->subset_hub(id, t.size), t, equal_nodes);
      return Status::OK();
    };
  }
  return worlds;
}

}  // namespace kolo::loopback
