// Node::create: one exchange to learn who shares this node and to agree on the
// segment's name, then the segment made by local rank 0 and mapped by the
// others, each step's outcome shared so that every rank fails alike.
#include "transports/shm/node.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "common/check.h"
#include "common/logging.h"
#include "transports/shm/allreduce.h"
#include "transports/shm/board.h"
#include "transports/shm/collectives.h"
#include "transports/shm/node_and.h"
#include "transports/shm/peer_read.h"

namespace kolo::shm {
namespace {

using transport::Bytes;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// What each rank says first, in one allgather: where it is, what it was asked
// for, and what the others need to probe its memory.
struct Hello {
  uint64_t token;  // rank 0's names every segment of the world
  uint64_t probe_address;
  uint64_t allreduce_slot_bytes;
  uint64_t collectives_slot_bytes;
  int32_t node_and;
  int32_t node;
  int32_t local_rank;
  int32_t local_size;
  int32_t pid;
  int32_t unused;
};

uint64_t draw_token() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// Checks that every rank asked for the same regions and that every node's
// ranks number themselves 0..n-1 once each: the same verdict on every rank.
Status check_hellos(const std::vector<Hello>& all) {
  const Hello& first = all[0];
  for (size_t r = 0; r < all.size(); ++r) {
    const Hello& h = all[r];
    if (h.allreduce_slot_bytes != first.allreduce_slot_bytes ||
        h.collectives_slot_bytes != first.collectives_slot_bytes || h.node_and != first.node_and) {
      return invalid_argument("ranks 0 and " + std::to_string(r) +
                              " ask for different regions of the node's segment");
    }
    for (size_t q = 0; q < r; ++q) {
      const Hello& o = all[q];
      if (o.node != h.node) continue;
      if (o.local_size != h.local_size || o.local_rank == h.local_rank) {
        return invalid_argument("ranks " + std::to_string(q) + " and " + std::to_string(r) +
                                " disagree about node " + std::to_string(h.node) +
                                " (local rank " + std::to_string(o.local_rank) + " of " +
                                std::to_string(o.local_size) + ", local rank " +
                                std::to_string(h.local_rank) + " of " +
                                std::to_string(h.local_size) +
                                "): the world's topology must number each node's ranks");
      }
    }
    if (h.local_rank < 0 || h.local_rank >= h.local_size) {
      return invalid_argument("rank " + std::to_string(r) + " is local rank " +
                              std::to_string(h.local_rank) + " of " +
                              std::to_string(h.local_size));
    }
  }
  std::map<int32_t, int32_t> ranks_on;  // node -> ranks that say they are there
  for (const Hello& h : all) ++ranks_on[h.node];
  for (const Hello& h : all) {
    if (ranks_on[h.node] == h.local_size) continue;
    return invalid_argument("node " + std::to_string(h.node) + " has " +
                            std::to_string(ranks_on[h.node]) + " ranks, which say it has " +
                            std::to_string(h.local_size));
  }
  return Status::OK();
}

// One step's outcome on every rank, plus one byte each (`flag`): the first
// failure in rank order, the same on every rank.
Status settle(transport::ControlPlane& control, const Status& mine, char flag,
              std::vector<char>* flags) {
  Bytes blob(2, '\0');
  blob[0] = static_cast<char>(mine.code());
  blob[1] = flag;
  blob += mine.message();
  std::vector<Bytes> all;
  KOLO_RETURN_IF_ERROR_AS_IS(control.allgather(blob, &all));
  flags->assign(all.size(), 0);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() < 2) return internal_error("node layer: a short reply from rank " + std::to_string(r));
    (*flags)[r] = all[r][1];
    if (all[r][0] != 0)
      return Status(static_cast<Code>(all[r][0]), "rank " + std::to_string(r) + ": " + all[r].substr(2));
  }
  return Status::OK();
}

}  // namespace

Layout layout_for(const NodeOptions& options, int local_size) {
  Layout l;
  size_t at = Layout::kPage;  // the board, the doorbell and the calibration's lines
  auto add = [&](size_t bytes, size_t* offset, size_t* size) {
    *offset = at;
    *size = bytes;
    at += round_up(bytes, Layout::kPage);
  };
  if (options.node_and) add(NodeAnd::kRegionBytes, &l.node_and, &l.node_and_bytes);
  if (options.allreduce_slot_bytes > 0)
    add(ShmAllreduce::region_bytes(options.allreduce_slot_bytes), &l.allreduce, &l.allreduce_bytes);
  if (options.collectives_slot_bytes > 0) {
    add(ShmCollectives::region_bytes(options.collectives_slot_bytes, local_size), &l.collectives,
        &l.collectives_bytes);
  }
  l.part_bytes = at;
  l.total_bytes = l.first_part + static_cast<size_t>(local_size) * l.part_bytes;
  return l;
}

Node::Node(const transport::Topology& topology, const NodeOptions& options)
    : options_(options),
      layout_(layout_for(options, topology.local_size)),
      node_(topology.node),
      local_rank_(topology.local_rank),
      claimed_(kRegions, false) {}

Node::~Node() = default;  // the Segment unmaps

Status Node::create(transport::ControlPlane& control, const NodeOptions& options,
                    std::shared_ptr<Node>* out) {
  std::shared_ptr<Node> node(new Node(control.topology(), options));
  KOLO_RETURN_IF_ERROR_AS_IS(node->build(control).with_context("creating the node's shared memory"));
  *out = std::move(node);
  return Status::OK();
}

Status Node::build(transport::ControlPlane& control) {
  SegmentHeader header;
  bool can_read = false;
  KOLO_RETURN_IF_ERROR_AS_IS(meet(control, &header, &can_read));
  KOLO_RETURN_IF_ERROR_AS_IS(map_segment(control, header, can_read));
  if (local_size() > 1) {
    core_distance_.init(CoreProbe{reinterpret_cast<uint64_t*>(at(0, Layout::kPing)),
                                  reinterpret_cast<uint64_t*>(at(0, Layout::kDecision))},
                        local_rank_, local_size());
  }
  return Status::OK();
}

// 1. Who is where: every rank's hello in one allgather, rank 0's token. Fills
// world_ranks_ and the segment's header; *can_read: whether this rank could read
// every node peer's probe word.
Status Node::meet(transport::ControlPlane& control, SegmentHeader* header, bool* can_read) {
  const transport::Topology& t = control.topology();
  Hello mine{};
  mine.token = t.rank == 0 ? draw_token() : 0;
  mine.probe_address = probe_address();
  mine.allreduce_slot_bytes = options_.allreduce_slot_bytes;
  mine.collectives_slot_bytes = options_.collectives_slot_bytes;
  mine.node_and = options_.node_and ? 1 : 0;
  mine.node = t.node;
  mine.local_rank = t.local_rank;
  mine.local_size = t.local_size;
  mine.pid = static_cast<int32_t>(getpid());
  std::vector<Bytes> blobs;
  KOLO_RETURN_IF_ERROR_AS_IS(
      control.allgather(Bytes(reinterpret_cast<const char*>(&mine), sizeof(mine)), &blobs));
  std::vector<Hello> all(blobs.size());
  for (size_t r = 0; r < blobs.size(); ++r) {
    if (blobs[r].size() != sizeof(Hello)) return internal_error("a hello of the wrong size");
    std::memcpy(&all[r], blobs[r].data(), sizeof(Hello));
  }
  KOLO_RETURN_IF_ERROR(check_hellos(all));
  world_ranks_.assign(static_cast<size_t>(t.local_size), -1);
  *can_read = true;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].node != node_) continue;
    world_ranks_[static_cast<size_t>(all[r].local_rank)] = static_cast<int>(r);
    if (all[r].local_rank == 0) header->creator_pid = all[r].pid;
    if (static_cast<int>(r) != t.rank)
      *can_read = *can_read && can_read_peer(all[r].pid, all[r].probe_address);
  }
  header->token = all[0].token;
  header->bytes = layout_.total_bytes;
  header->node = node_;
  header->local_size = t.local_size;
  return Status::OK();
}

// 2. Local rank 0 makes the segment and zeroes its part; 3. the others map it and
// zero theirs, and every rank writes its board line; 4. the name goes (Note [A
// segment outlives no job]). Each step's outcome is shared, so every rank fails
// alike; a failure leaves no name behind (the creator's Segment unlinks it).
Status Node::map_segment(transport::ControlPlane& control, const SegmentHeader& header,
                         bool can_read) {
  const std::string name = Segment::name(header.token, node_);
  Status made;
  if (local_rank_ == 0) {
    made = Segment::create(name, header, &segment_);
    if (made.ok()) made = segment_->reserve(0, layout_.first_part + layout_.part_bytes);
    if (made.ok()) {
      base_ = segment_->base();
      std::memset(at(0, 0), 0, layout_.part_bytes);
    }
  }
  std::vector<char> readers;
  KOLO_RETURN_IF_ERROR_AS_IS(settle(control, made, can_read ? 1 : 0, &readers));
  single_copy_ = local_size() > 1;
  for (int r : world_ranks_) single_copy_ = single_copy_ && readers[static_cast<size_t>(r)] == 1;
  Status mapped;
  if (local_rank_ != 0) {
    mapped = Segment::open(name, header, &segment_);
    const size_t part = layout_.first_part + static_cast<size_t>(local_rank_) * layout_.part_bytes;
    if (mapped.ok()) mapped = segment_->reserve(part, layout_.part_bytes);
    if (mapped.ok()) {
      base_ = segment_->base();
      std::memset(at(local_rank_, 0), 0, layout_.part_bytes);
    }
  }
  if (mapped.ok()) NodeBoard::introduce(at(local_rank_, Layout::kBoard), control.topology().rank);
  std::vector<char> unused;
  KOLO_RETURN_IF_ERROR_AS_IS(settle(control, mapped, 0, &unused));
  Status unlinked = segment_->unlink();
  if (!unlinked.ok()) KOLO_LOG(kWarning) << unlinked.message();
  return Status::OK();
}

Status Node::claim(Region region, const char* engine) {
  bool present = true;
  switch (region) {
    case Region::kNodeAnd: present = layout_.node_and_bytes > 0; break;
    case Region::kAllreduce: present = layout_.allreduce_bytes > 0; break;
    case Region::kCollectives: present = layout_.collectives_bytes > 0; break;
    case Region::kDoorbell:
    case Region::kBoard: break;
  }
  if (!present) return internal_error(std::string(engine) + ": the node's segment has no region for it");
  const size_t i = static_cast<size_t>(region);
  if (claimed_[i]) return internal_error(std::string(engine) + ": its region of the node's segment is in use");
  claimed_[i] = true;
  return Status::OK();
}

}  // namespace kolo::shm
